"""The text of the ``dated-journals`` set: our own, written for this evaluation (no third-party text).

A fictional team builds "Ledgerly", an invoicing service. Each :class:`Topic` is a subject the
team decides on again and again; its ``versions`` are the successive decisions in story order
(the generator in :mod:`evaluation.dated` puts them on different days, oldest first). A version is
one journal turn, one bullet per fact. ``asks`` are the time-scoped question templates (``{when}``
is replaced by a time phrase such as "last week" or "上周"); ``plain`` is the question without a
time phrase, whose gold is every version of the topic. ``prefer`` orders the kinds of day window
the topic's time-scoped questions use (the first ones that do not overlap win; see
:data:`evaluation.dated.KINDS`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    key: str
    lang: str  # "en" or "zh": the language of its journal entries and questions
    versions: tuple[tuple[str, ...], ...]
    asks: tuple[str, str, str]
    plain: str
    prefer: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        "retry",
        "en",
        (
            ("Retry policy for the payment webhook client: 3 retries with a fixed 2 second delay.",),
            (
                "Retry policy changed to exponential backoff: start at 500 ms, double each time, cap 30 s.",
                "Webhook retries now stop after 6 attempts.",
            ),
            (
                "Retry policy removed: the webhook client no longer retries at all.",
                "Failed webhook deliveries go straight to the dead-letter queue for manual replay.",
            ),
            ("Retry policy back for 503 responses only, with random jitter, at most 2 retries.",),
        ),
        (
            "What did we decide {when} about the retry policy?",
            "How did the webhook retry policy change {when}?",
            "What was the retry policy decision {when}?",
        ),
        "What is the retry policy of the payment webhook client?",
        ("M2", "LW", "Y", "T0", "LM"),
    ),
    Topic(
        "release24",
        "en",
        (
            ("Release date for v2.4 set to the end of the sprint; Ana owns the release checklist.",),
            ("The v2.4 release slipped by one week because the invoice migration is not ready.",),
            ("v2.4 release frozen until the security review of the new login flow is signed off.",),
            ("v2.4 released to all customers; release notes published on the status page.",),
        ),
        (
            "What happened with the v2.4 release {when}?",
            "What did we say about the v2.4 release date {when}?",
            "Which v2.4 release decision did we make {when}?",
        ),
        "When is the v2.4 release?",
        ("LM", "D3", "T0", "M2", "Y", "LW"),
    ),
    Topic(
        "migration",
        "en",
        (
            ("DB migration 0042 adds an invoice_status column with a backfill of old invoices.",),
            (
                "DB migration 0042 split into two steps: add the column first, backfill in batches later.",
                "Reason: the single migration locked the invoices table for minutes in staging.",
            ),
            ("DB migration 0042 rolled back in production after lock timeouts on the invoices table.",),
            ("DB migrations from now on run only in the Sunday night maintenance window.",),
        ),
        (
            "What did we decide about the database migration {when}?",
            "What happened to DB migration 0042 {when}?",
            "How did we handle the invoice table migration {when}?",
        ),
        "What did we decide about DB migration 0042 on the invoices table?",
        ("M2", "LM", "Y", "LW", "T0"),
    ),
    Topic(
        "ratelimit",
        "en",
        (
            ("API rate limit set to 100 requests per minute per API token.",),
            ("API rate limit raised to 300 requests per minute for enterprise customers.",),
            ("API rate limiting switched to a token bucket with bursts of up to 50 requests.",),
            ("Internal service calls are exempt from the API rate limit from now on.",),
        ),
        (
            "What did we change {when} in the API rate limits?",
            "What was decided about API rate limiting {when}?",
            "How did the API rate limit change {when}?",
        ),
        "What is the API rate limit per token?",
        ("LW", "M2", "T0", "Y", "LM"),
    ),
    Topic(
        "logging",
        "en",
        (
            ("Logging: all services write structured JSON logs with a request id field.",),
            ("Debug logs are sampled at 10 percent in production to cut logging costs.",),
            ("Logging moved to OpenTelemetry; the old log shipper agent is uninstalled.",),
            ("Log retention reduced to 14 days, error logs kept for 90 days.",),
        ),
        (
            "What did we decide about logging {when}?",
            "How did the logging setup change {when}?",
            "What logging decision did we make {when}?",
        ),
        "How do our services do logging?",
        ("MC", "M2", "M1N", "LW", "T0"),
    ),
    Topic(
        "cache",
        "en",
        (
            ("Customer profiles cached in Redis with a 5 minute TTL.",),
            ("Cache TTL cut to 60 seconds after customers saw stale prices.",),
            ("Caching disabled for pricing data; prices are always read from the database.",),
            ("Profile cache switched to write-through so updates show immediately.",),
        ),
        (
            "What did we decide {when} about the Redis cache?",
            "How did the caching of customer data change {when}?",
            "What cache TTL decision was made {when}?",
        ),
        "How long do we cache customer profiles in Redis?",
        ("D4", "LM", "M2", "T0", "Y", "LW"),
    ),
    Topic(
        "checkout",
        "en",
        (
            ("New checkout feature flag turned on for 5 percent of traffic, internal accounts only.",),
            ("New checkout flag ramped up to 50 percent of customers.",),
            ("New checkout rolled back to 0 percent after a drop in conversion on mobile.",),
            ("New checkout enabled for 100 percent; the feature flag will be deleted next sprint.",),
        ),
        (
            "What did we do with the new checkout feature flag {when}?",
            "How far was the new checkout rolled out {when}?",
            "What checkout rollout decision did we make {when}?",
        ),
        "What is the rollout state of the new checkout feature flag?",
        ("Y", "M2", "LW", "LM", "T0"),
    ),
    Topic(
        "ci",
        "en",
        (
            ("CI pipeline: test suite split into 4 parallel shards to get under 10 minutes.",),
            ("CI pipeline: end-to-end browser tests run nightly only, not on every push.",),
            ("CI pipeline caches pip wheels and node modules between runs.",),
            ("CI pipeline must be green on main before any deploy; no more manual overrides.",),
        ),
        (
            "What did we change in the CI pipeline {when}?",
            "What was decided about CI {when}?",
            "How did the CI pipeline change {when}?",
        ),
        "How is our CI pipeline set up?",
        ("TW", "LM", "M2", "LW", "Y", "T0"),
    ),
    Topic(
        "session",
        "en",
        (
            ("User sessions expire after 30 minutes of inactivity.",),
            ("Session lifetime extended to 8 hours, with refresh tokens rotated on every use.",),
            ("Admin accounts must use two-factor authentication; admin sessions last 1 hour.",),
            ("Remember-me sessions dropped; every session ends when the browser closes.",),
        ),
        (
            "What did we decide about session timeouts {when}?",
            "How did user session expiry change {when}?",
            "What was the session lifetime decision {when}?",
        ),
        "How long do user sessions last before they expire?",
        ("D5", "M2", "LM", "LW", "T0", "Y"),
    ),
    Topic(
        "backup",
        "en",
        (
            ("Database backups: nightly full snapshot kept for 7 days.",),
            ("Backups now also ship to a second region every night.",),
            ("Backup restore drill failed: the snapshot was missing the attachments bucket.",),
            ("Backup retention raised to 35 days; restore drills every quarter.",),
        ),
        (
            "What did we decide about database backups {when}?",
            "What happened with the backups {when}?",
            "How did the backup plan change {when}?",
        ),
        "What is our database backup plan?",
        ("M1N", "M2", "Y", "T0", "LW"),
    ),
    Topic(
        "export",
        "zh",
        (
            ("导出失败的原因是请求超时，导出任务改成异步队列处理。",),
            ("大文件导出失败，改为分批导出，每批 5000 行。",),
            ("导出失败是 S3 存储桶权限不够，已经更新了 IAM 策略。",),
            ("导出失败时给用户发邮件通知，并自动重试一次。",),
        ),
        (
            "{when}我们怎么处理的导出失败？",
            "{when}导出失败的问题是怎么解决的？",
            "{when}关于导出失败做了什么决定？",
        ),
        "导出失败是怎么处理的？",
        ("LW", "M2", "Y", "T0", "LM"),
    ),
    Topic(
        "mobile",
        "zh",
        (
            ("移动端 3.0 版本定在月底发布，由小李负责发布清单。",),
            ("移动端 3.0 发布推迟两周，等支付接口联调完成。",),
            ("移动端 3.0 改成灰度发布，先开放给 10% 的用户。",),
            ("移动端 3.0 已经全量发布，应用商店审核通过。",),
        ),
        (
            "{when}移动端 3.0 的发布有什么变化？",
            "{when}关于 3.0 发布日期是怎么定的？",
            "{when}移动端发布做了什么决定？",
        ),
        "移动端 3.0 什么时候发布？",
        ("M2", "LM", "D3", "T0", "Y", "LW"),
    ),
    Topic(
        "oncall",
        "zh",
        (
            ("值班改成每周轮换，小王负责第一周的主值班。",),
            ("夜间告警只通知主值班，副值班不再被叫醒。",),
            ("值班交接改到每周一早会上进行。",),
            ("取消周末人工值班，周末告警自动升级给负责人。",),
        ),
        (
            "{when}值班安排有什么调整？",
            "{when}我们对值班做了什么决定？",
            "{when}值班制度是怎么改的？",
        ),
        "我们的值班安排是怎样的？",
        ("Y", "LM", "M2", "LW", "T0"),
    ),
    Topic(
        "review",
        "zh",
        (
            ("代码评审规则：合并前需要两个人审批。",),
            ("代码评审放宽：小改动（少于 20 行）只需要一个人审批即可合并。",),
            ("代码评审要求 CI 全部通过之后才能合并。",),
            ("周五下午不再合并代码，评审推到下周一。",),
        ),
        (
            "{when}代码评审规则改了什么？",
            "{when}我们对代码评审做了什么决定？",
            "{when}关于合并代码的评审要求有什么变化？",
        ),
        "我们的代码评审规则是什么？",
        ("LW", "M2", "T0", "LM", "Y"),
    ),
    Topic(
        "alerts",
        "zh",
        (
            ("告警阈值：CPU 使用率超过 80% 就告警。",),
            ("CPU 告警阈值改成 90% 并且持续 5 分钟才触发。",),
            ("新增错误率告警，阈值是接口错误率超过 1%，超过立即告警。",),
            ("所有告警合并到一个频道，重复告警十分钟内只发一次。",),
        ),
        (
            "{when}告警阈值是怎么调整的？",
            "{when}关于告警我们做了什么决定？",
            "{when}监控告警有什么变化？",
        ),
        "监控告警的阈值是多少？",
        ("MC", "M2", "M1N", "LW", "T0"),
    ),
    Topic(
        "staging",
        "zh",
        (
            ("测试环境每天凌晨自动重置数据库。",),
            ("测试环境改成每周重置一次，方便长时间的联调。",),
            ("测试环境拆成两套：一套给前端，一套给支付联调。",),
            ("测试环境的数据改用脱敏后的生产数据。",),
        ),
        (
            "{when}测试环境有什么变化？",
            "{when}关于测试环境做了什么决定？",
            "{when}测试环境的重置策略是怎么改的？",
        ),
        "测试环境的数据多久重置一次？",
        ("D4", "M2", "LM", "T0", "Y", "LW"),
    ),
    Topic(
        "search",
        "zh",
        (
            ("搜索索引每小时全量重建一次。",),
            ("搜索索引改成增量更新，全量重建只在周日做。",),
            ("搜索索引重建失败，原因是磁盘空间不足，已经扩容。",),
            ("搜索服务迁到新的集群，旧索引下个月删除。",),
        ),
        (
            "{when}搜索索引有什么变化？",
            "{when}我们对搜索索引重建做了什么决定？",
            "{when}搜索索引出了什么问题？",
        ),
        "搜索索引是怎么更新的？",
        ("TW", "LM", "M2", "LW", "Y", "T0"),
    ),
    Topic(
        "deps",
        "zh",
        (
            ("依赖升级：Django 先固定在 4.2 长期支持版本。",),
            ("依赖升级到 Django 5.0 的计划推迟，等第三方插件兼容。",),
            ("依赖扫描发现 requests 有安全漏洞，已经升级。",),
            ("依赖升级改成每月第一个周二统一处理。",),
        ),
        (
            "{when}依赖升级有什么决定？",
            "{when}我们怎么处理的依赖升级？",
            "{when}关于 Django 版本升级说了什么？",
        ),
        "我们的依赖升级策略是什么？",
        ("D5", "M2", "LM", "LW", "T0", "Y"),
    ),
)

#: Plain questions whose words look like time but are not (a modal "may", an ordinal
#: "second", 日 in 日志, 周 in 周期) or name a weekday that recurs (the Sunday maintenance
#: window, the Monday meeting) rather than a date: time-aware search must leave them alone.
#: (topic key, language, question)
TRAPS: tuple[tuple[str, str, str], ...] = (
    ("backup", "en", "What may make the database backups fail?"),
    ("migration", "en", "Why was DB migration 0042 split into a second step?"),
    ("migration", "en", "Do DB migrations run in the Sunday night maintenance window?"),
    ("alerts", "zh", "告警日志里 CPU 阈值是多少？"),
    ("staging", "zh", "测试环境的重置周期是多久？"),
    ("oncall", "zh", "值班交接是在周一早会上做吗？"),
)

#: Day-summary questions: the day before yesterday holds only unrelated chatter; the gold is all of it.
DAY_SUMMARY = {
    "en": "What did we work on {when}?",
    "zh": "{when}我们都做了什么？",
}

#: Unrelated journal turns that fill the other days (no topic's words).
FILLERS: dict[str, tuple[str, ...]] = {
    "en": (
        "Reviewed the wording of the onboarding guide with Sam.",
        "Pair-programmed on the invoice PDF layout; the footer now wraps correctly.",
        "Fixed a flaky timezone test in the reports module.",
        "Renamed the settings page components to match the design system.",
        "Discussed the colour palette for dark mode; no decision yet.",
        "Cleaned up unused feature screenshots from the docs folder.",
        "Answered a support question about currency rounding on invoices.",
        "Refactored the tax calculation helpers into their own package.",
        "Sketched the customer dashboard empty states in Figma.",
        "Updated the README with the local setup steps for Windows.",
        "Went through the accessibility audit notes for the signup form.",
        "Spiked a prototype of bulk editing for invoice line items.",
        "Wrote unit tests for the discount code parser.",
        "Tidied the issue tracker labels and closed stale tickets.",
        "Interviewed a candidate for the frontend role.",
        "Looked into why the font loads twice on the landing page.",
        "Added keyboard shortcuts to the invoice editor.",
        "Gave a short demo of the new reporting charts to the sales team.",
    ),
    "zh": (
        "整理了新人入职文档，补充了本地开发的步骤。",
        "修复了报表页面在小屏幕上的样式问题。",
        "讨论了设计系统的颜色规范，暂时没有结论。",
        "给发票编辑器加了快捷键。",
        "回答了客户关于货币四舍五入的问题。",
        "重构了税费计算的辅助函数。",
        "和产品一起过了一遍用户访谈的记录。",
        "清理了过期的工单和没用的标签。",
        "写了折扣码解析器的单元测试。",
        "优化了首页字体加载，减少了一次请求。",
        "给销售团队演示了新的报表图表。",
        "画了客户仪表盘空状态的草图。",
    ),
}
