#!/usr/bin/env python3
"""memsearch's own benchmark corpus: deterministic agent journals of one fictional project.

The corpus imitates what the memsearch agent plugins write while a developer works with Claude Code
on "Tidemark", an invoicing and payments web service (Python API, Postgres, Redis, Celery workers, a
React front end, Kubernetes). Each turn records one piece of work: a bug chased down to its cause, a
design decision and why, a slow endpoint profiled, a feature built, an incident, a stated
preference. The same bugs and decisions come back on different days with different details, so a
search has near misses to rank, as in a real memory folder.

Output under OUT (an absolute path is written into every anchor)::

    OUT/memory/YYYY-MM-DD.md       one daily journal per file
    OUT/sessions/<session>.jsonl   one Claude Code transcript per session

A journal holds ``# YYYY-MM-DD``, then per session ``## Session HH:MM``, then per turn ``### HH:MM``,
an anchor ``<!-- session:<uuid> turn:<uuid> transcript:OUT/sessions/<uuid>.jsonl -->`` and ``- ``
bullets. Headings without a body make no chunk, and every turn stays under memsearch's default
``max_chunk_size`` (1,500 characters), so each ``### HH:MM`` turn is exactly one chunk and ``--chunks``
is exact. The anchor's turn id is the uuid of the user record in the session transcript, so
``memsearch transcript <file> --turn <id>`` shows the conversation behind a chunk.

Usage::

    python evaluation/gen_corpus.py OUT [--files 60] [--chunks 2000] [--seed 7] [--zh 0.1]
    python evaluation/gen_corpus.py OUT --edit-one   # one bullet changed, one turn appended, one file
    python evaluation/gen_corpus.py OUT --queries    # the fixed query set, one per line

Standard library only; the same arguments give byte-identical files. The defaults give about 10 %
Chinese turns and a mean of about 1,000 characters per chunk. Every query of ``--queries`` is
answered by a turn placed in the corpus on purpose (the Chinese ones when ``--zh`` is above 0 and
the corpus has at least as many turns as there are queries).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["QUERIES", "edit_one", "generate", "main"]

#: memsearch's default ``max_chunk_size``: a turn longer than this would be split into two chunks.
MAX_TURN_CHARS = 1500
#: Bullets of one turn never exceed this many characters, so the heading and the anchor (whose
#: length grows with OUT's path) fit in the remaining ~340.
BODY_LIMIT = 1150
EN_TARGET = (480, 1150)  # a turn's body length is drawn from these ranges
ZH_TARGET = (260, 760)  # Chinese says as much in fewer characters
FIRST_DAY = dt.date(2026, 3, 2)
PROJECT_DIR = "/home/dev/src/tidemark"


# --- what the project is made of -----------------------------------------------------------------


@dataclass(frozen=True)
class Bug:
    area: str
    symptom: str  # completes "User reported that ..."
    error: str
    cause: str
    fix: str
    path: str
    test: str


BUGS = [
    Bug(
        "Stripe webhooks",
        "Stripe webhooks were being processed twice and customers got two receipts",
        'IntegrityError: duplicate key value violates unique constraint "payments_event_id_key"',
        "the retry worker re-delivered an event before the first attempt committed, and the handler "
        "never looked at the event id",
        "the handler now upserts on `event_id` and returns 200 for an event it has already seen",
        "tidemark/payments/webhooks.py",
        "tests/payments/test_webhooks.py",
    ),
    Bug(
        "VAT",
        "VAT on invoices with many line items was off by one cent",
        "AssertionError: Decimal('119.99') != Decimal('120.00')",
        "tax was rounded on every line and the rounded lines were summed",
        "round once, on the invoice total, with `Decimal.quantize` and ROUND_HALF_EVEN",
        "tidemark/billing/tax.py",
        "tests/billing/test_tax.py",
    ),
    Bug(
        "CSV import",
        "the customer CSV import failed on every file exported from Excel",
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0",
        "Excel saved the file as UTF-16 with a byte order mark",
        "sniff the BOM and decode as UTF-16 or utf-8-sig before handing the text to the csv module",
        "tidemark/imports/csv_reader.py",
        "tests/imports/test_csv_reader.py",
    ),
    Bug(
        "migration 0042",
        "migration 0042 hung for twenty minutes during the production deploy",
        "psycopg.errors.LockNotAvailable: canceling statement due to lock timeout",
        "`ALTER TABLE invoices ADD COLUMN currency ... DEFAULT 'EUR'` waited for an ACCESS EXCLUSIVE "
        "lock behind a long-running report query",
        "add the column without a default, backfill in batches of 5,000 rows, then set the default",
        "migrations/versions/0042_add_currency.py",
        "tests/migrations/test_0042.py",
    ),
    Bug(
        "API memory",
        "the API pods were OOMKilled every few hours",
        "OOMKilled (exit code 137), container memory limit 512Mi",
        "a module-level `functools.lru_cache` without a size kept every rendered invoice template",
        "bound the cache to 256 entries and key it on the template id instead of the rendered context",
        "tidemark/pdf/templates.py",
        "tests/pdf/test_templates.py",
    ),
    Bug(
        "monthly billing job",
        "monthly invoices were generated twice on the 1st",
        "two `billing-monthly` pods both logged 'generated 4,812 invoices' at 00:00 UTC",
        "the CronJob had `concurrencyPolicy: Allow` and the first pod started late, so a retry overlapped it",
        "set `concurrencyPolicy: Forbid` and take a Postgres advisory lock at the start of the job",
        "deploy/helm/templates/cronjob-billing.yaml",
        "tests/billing/test_monthly_run.py",
    ),
    Bug(
        "invoice search",
        "searching invoices for 'Müller' found nothing although the customer exists",
        "no exception; the query returned 0 rows",
        "names are stored with accents and the search compared them with `ILIKE` on the raw column",
        "search an `unaccent(lower(name))` expression index and normalise the query the same way",
        "tidemark/search/query.py",
        "tests/search/test_query.py",
    ),
    Bug(
        "invoice table",
        "the invoice table froze the browser for customers with 8,000 invoices",
        "Warning: Maximum update depth exceeded",
        "a `useEffect` set the sort state on every render, and every row was rendered at once",
        "memoise the sort key and render rows with `react-window`",
        "web/src/components/InvoiceTable.tsx",
        "web/src/components/InvoiceTable.test.tsx",
    ),
    Bug(
        "due dates",
        "due dates were one day early for customers in Auckland",
        "expected 2026-03-01, got 2026-02-28",
        "the due date was converted to UTC before being truncated to a date",
        "keep due dates as plain dates in the customer's time zone and convert only timestamps",
        "tidemark/billing/due_dates.py",
        "tests/billing/test_due_dates.py",
    ),
    Bug(
        "refund test",
        "test_refund_partial failed about one run in twenty on CI",
        "AssertionError: expected status 'refunded', got 'pending'",
        "the test did not wait for the Celery task, and CI ran with eager mode off",
        "run Celery tasks eagerly in tests (`task_always_eager=True` in the test settings)",
        "tests/conftest.py",
        "tests/payments/test_refunds.py",
    ),
    Bug(
        "rate limiter",
        "one customer's integration got HTTP 429 from the public API all afternoon",
        "429 Too Many Requests (limit 600/min) for every client behind the load balancer",
        "the limiter keyed requests on the load balancer's address instead of the client's",
        "key the limiter on the first trusted `X-Forwarded-For` hop and the API key",
        "tidemark/api/ratelimit.py",
        "tests/api/test_ratelimit.py",
    ),
    Bug(
        "reminder emails",
        "payment reminder emails stopped going out after Tuesday's deploy",
        "kombu.exceptions.OperationalError: Error 111 connecting to redis-old.internal:6379",
        "the email workers kept a stale REDIS_URL from a ConfigMap that the deploy did not restart them for",
        "add a checksum annotation of the ConfigMap to the worker Deployment so config changes roll the pods",
        "deploy/helm/templates/worker-deployment.yaml",
        "tests/workers/test_email_queue.py",
    ),
    Bug(
        "JPY amounts",
        "invoices in Japanese yen showed two decimal places",
        "¥12,000.00 rendered where ¥12,000 was expected",
        "amounts were formatted with a fixed two decimals for every currency",
        "format with the currency's minor-unit exponent from ISO 4217",
        "tidemark/money/format.py",
        "tests/money/test_format.py",
    ),
    Bug(
        "login sessions",
        "users were logged out after exactly 15 minutes even while they were working",
        "401 Unauthorized: refresh token not found",
        "the rotated refresh cookie was set with `path=/api/auth`, so the browser never sent it to `/api/v1`",
        "set the refresh cookie on `path=/` with `SameSite=Lax` and slide the session on every request",
        "tidemark/auth/session.py",
        "tests/auth/test_session.py",
    ),
]


@dataclass(frozen=True)
class Decision:
    question: str  # completes "User asked ..."
    options: str
    choice: str
    reason: str


DECISIONS = [
    Decision(
        "how we should store money amounts",
        "float columns, NUMERIC(12,2), or integer minor units",
        "store amounts as BIGINT minor units next to an ISO 4217 currency code",
        "floats lose cents, and NUMERIC sums were three times slower in the monthly reports",
    ),
    Decision(
        "which library should render invoice PDFs",
        "WeasyPrint or headless Chromium via Playwright",
        "WeasyPrint",
        "no browser in the container (the image shrinks from 1.3 GB to 310 MB) and the output matched",
    ),
    Decision(
        "which queue to use for background jobs",
        "Celery on Redis, RQ, or a Postgres-backed queue",
        "keep Celery on Redis",
        "the team knows it, and retries with backoff and ETA scheduling are built in",
    ),
    Decision(
        "how to version the public API",
        "a version header or a path prefix",
        "path versions (`/v1`, `/v2`) with twelve months of deprecation notice",
        "customers can see the version in their logs and curl examples stay copy-pasteable",
    ),
    Decision(
        "whether the test suite should use SQLite or Postgres",
        "in-memory SQLite or Postgres in Docker via testcontainers",
        "Postgres via testcontainers for every test that touches the database",
        "SQLite hid two JSONB bugs that reached staging",
    ),
    Decision(
        "how to roll out risky changes",
        "long-lived branches or feature flags",
        "feature flags in a Postgres table, cached for 30 seconds in each process",
        "no extra service to run, and a flag can be turned off without a deploy",
    ),
    Decision(
        "what the logs should look like",
        "plain text or structured JSON",
        "JSON logs with `request_id`, `customer_id` and `duration_ms` on every line",
        "Loki can filter one request across the API and the workers",
    ),
    Decision(
        "where secrets should live",
        "Kubernetes secrets created by hand, Vault, or SOPS-encrypted files in the repository",
        "SOPS-encrypted values files decrypted by the helm-secrets plugin at deploy time",
        "changes to secrets get reviewed like code and nothing is created by hand",
    ),
    Decision(
        "how to keep dependencies up to date",
        "Dependabot or Renovate",
        "Renovate once a week, minor updates grouped into one PR, major updates by hand",
        "one review a week instead of twenty small PRs",
    ),
    Decision(
        "how to deploy without downtime",
        "blue/green or rolling updates",
        "rolling updates with `maxUnavailable: 0` and a readiness probe on `/healthz`",
        "blue/green would double the database connections during every deploy",
    ),
]


@dataclass(frozen=True)
class Slowness:
    target: str
    before: str
    after: str
    cause: str
    fix: str
    path: str


SLOWNESS = [
    Slowness(
        "GET /v1/invoices",
        "1.8 s at p95",
        "140 ms at p95",
        "an N+1 query: line items were loaded invoice by invoice",
        "load line items with `selectinload` and page by keyset instead of OFFSET",
        "tidemark/api/routes/invoices.py",
    ),
    Slowness(
        "the monthly revenue export",
        "11 minutes",
        "52 seconds",
        "the ORM built 2 million objects before writing a single row",
        "stream rows with a server-side cursor and write them with `COPY ... TO STDOUT`",
        "tidemark/reports/revenue_export.py",
    ),
    Slowness(
        "PDF rendering",
        "2.4 s per invoice",
        "380 ms per invoice",
        "fonts were parsed again for every document",
        "load the fonts once per worker process",
        "tidemark/pdf/render.py",
    ),
    Slowness(
        "the dashboard page",
        "6.1 s to interactive",
        "1.3 s to interactive",
        "a 3.2 MB bundle, most of it moment.js locales and the chart library",
        "switch to date-fns and load the charts with a dynamic import",
        "web/src/pages/Dashboard.tsx",
    ),
    Slowness(
        "customer search",
        "900 ms per keystroke",
        "35 ms per keystroke",
        "`ILIKE '%term%'` scanned the whole customers table",
        "add a `pg_trgm` GIN index and debounce the input by 250 ms",
        "tidemark/search/customers.py",
    ),
]


@dataclass(frozen=True)
class Feature:
    name: str
    work: str
    path: str


FEATURES = [
    Feature(
        "partial refunds",
        "a `refund(amount)` method on Payment that records a negative ledger entry",
        "tidemark/payments/refunds.py",
    ),
    Feature(
        "credit notes",
        "a CreditNote model linked to the original invoice, numbered in its own sequence",
        "tidemark/billing/credit_notes.py",
    ),
    Feature(
        "dunning emails",
        "reminders 7, 14 and 30 days after the due date, each one skipped once the invoice is paid",
        "tidemark/workers/dunning.py",
    ),
    Feature(
        "an audit log for invoice edits",
        "a trigger-free audit table written in the same transaction as the edit",
        "tidemark/audit/log.py",
    ),
    Feature(
        "webhook signing secret rotation",
        "two active secrets per endpoint during a 24-hour overlap",
        "tidemark/webhooks/signing.py",
    ),
    Feature(
        "CSV export of payments",
        "a streaming endpoint `GET /v1/payments.csv` with the same filters as the list view",
        "tidemark/api/routes/payments.py",
    ),
    Feature(
        "dark mode in the web app",
        "CSS variables for every colour and a toggle stored in localStorage",
        "web/src/theme/tokens.css",
    ),
    Feature(
        "SAML single sign-on",
        "python3-saml behind a per-organisation setting, with just-in-time user creation",
        "tidemark/auth/saml.py",
    ),
]


@dataclass(frozen=True)
class Incident:
    event: str
    detected: str
    mitigation: str
    follow_up: str


INCIDENTS = [
    Incident(
        "the TLS certificate of api.tidemark.io expired at 03:12 UTC",
        "the uptime check paged the on-call engineer at 03:15",
        "renewed it by hand with `certbot renew --force-renewal` and reloaded the ingress",
        "move the certificate to cert-manager with an alert 14 days before expiry",
    ),
    Incident(
        "the Postgres data volume reached 92 % full",
        "a Grafana alert on disk usage",
        "dropped the 40 GB `events_archive_2024` table after checking the S3 export",
        "partition `events` by month and drop partitions older than 18 months",
    ),
    Incident(
        "the nightly backup to S3 failed with AccessDenied",
        "the backup job's failure email, three nights in a row",
        "the IAM role lost `s3:PutObject` when the bucket policy was rewritten; restored the statement",
        "run a restore test every Monday so a broken backup is noticed within a week",
    ),
    Incident(
        "the payments API returned 502 for eleven minutes",
        "customers on the status page and the error-rate alert",
        "rolled back the ingress controller upgrade with `helm rollback ingress-nginx 14`",
        "upgrade the ingress on staging first and watch it for a day",
    ),
]

#: (topic, what the user said, how the journal records it)
PREFERENCES = [
    (
        "pull requests",
        "keep pull requests under 400 changed lines; split anything bigger",
        "keeps pull requests under 400 changed lines and splits anything bigger",
    ),
    (
        "commits",
        "squash-merge with a Conventional Commits title like `fix(billing): ...`",
        "wants squash merges with a Conventional Commits title like `fix(billing): ...`",
    ),
    (
        "dependencies",
        "never add a new dependency without asking me first",
        "does not want a new dependency added without asking first",
    ),
    (
        "answers",
        "show me the diff first and explain it after, in a few lines",
        "wants the diff first and the explanation after it, in a few lines",
    ),
    (
        "tests",
        "use `pytest.mark.parametrize` instead of copy-pasting test functions",
        "wants `pytest.mark.parametrize` instead of copy-pasted test functions",
    ),
    (
        "typing",
        "every public function gets type hints, and `tidemark/` stays clean under `mypy --strict`",
        "wants type hints on every public function and `mypy --strict` clean in `tidemark/`",
    ),
    (
        "spelling",
        "user-facing text uses British spelling (licence, cancelled, colour)",
        "wants British spelling in user-facing text (licence, cancelled, colour)",
    ),
    (
        "pushes",
        "run the full test suite before every push, not only the changed file",
        "runs the full test suite locally before every push, never only the changed file",
    ),
]

COMMANDS = [
    ("pytest -q tests/billing", "212 passed in 48.31s"),
    ("pytest -q -x --lf", "3 passed, 209 deselected in 4.02s"),
    ("alembic upgrade head", "INFO  [alembic.runtime.migration] Running upgrade 0041 -> 0042, add currency"),
    ("kubectl -n tidemark rollout status deploy/api", 'deployment "api" successfully rolled out'),
    ("docker compose up -d postgres redis", "Container tidemark-postgres-1  Started"),
    ("npm run build --workspace web", "built in 11.42s, dist/assets/index.js 612 kB"),
    ("ruff check tidemark tests", "All checks passed!"),
    ("mypy tidemark", "Success: no issues found in 187 source files"),
    ("git bisect run pytest -x tests/pdf", "4be1f09 is the first bad commit"),
    ("celery -A tidemark.workers inspect active", "-> celery@worker-7f9c: OK, empty"),
    ("py-spy record -o profile.svg --pid 4121", "Wrote flamegraph data to 'profile.svg'. Samples: 12044"),
    ("locust -f loadtests/invoices.py -u 200 -r 20 --headless -t 5m", "p95 420 ms at 180 req/s, 0 failures"),
    ("psql $DATABASE_URL -c 'SELECT count(*) FROM invoices'", "count: 1284377"),
    ("helm upgrade tidemark deploy/helm -f deploy/helm/values-staging.yaml", "Release has been upgraded."),
]

PEOPLE = ["Priya", "Marco", "Yuki", "Tomás", "Ingrid", "Kwame", "Lena"]
CHANNELS = ["#billing", "#payments-oncall", "#web", "#platform", "#support-escalations"]
REVIEW_ASKS = [
    "a comment explaining the lock",
    "a test for the empty case",
    "a smaller diff",
    "a metric for the retry count",
    "clearer names for the two helpers",
    "a note in the changelog",
]
VERIFICATIONS = [
    "the staging smoke tests pass",
    "error rate on staging stayed at 0.0 % for an hour",
    "Sentry shows no new issues since the deploy",
    "the Grafana dashboard is back to normal",
    "the customer confirmed the fix",
]

# Chinese turns: the same project, written by a Chinese-speaking developer.
ZH_BUGS = [
    Bug(
        "退款测试",
        "部分退款的测试在 CI 上偶尔失败，大约二十次出现一次",
        "AssertionError: expected status 'refunded', got 'pending'",
        "CI 没有开启 Celery 的 eager 模式，测试没有等异步任务完成就断言了结果",
        "在测试配置里设置 task_always_eager=True，并给测试加上超时",
        "tests/conftest.py",
        "tests/payments/test_refunds.py",
    ),
    Bug(
        "数据库连接池",
        "高峰期 API 大量返回 500，日志显示数据库连接池耗尽",
        "sqlalchemy.exc.TimeoutError: QueuePool limit of size 5 overflow 10 reached",
        "每个 gunicorn worker 的连接池太小，而且月度报表查询长时间占用连接",
        "把 pool_size 调到 20，并让报表查询走只读副本",
        "tidemark/db.py",
        "tests/test_db.py",
    ),
    Bug(
        "发票编号",
        "两张不同的发票出现了相同的编号",
        'IntegrityError: duplicate key value violates unique constraint "invoices_number_key"',
        "编号由应用先查询最大值再加一，并发创建时会冲突",
        "改用 Postgres 序列生成发票编号",
        "tidemark/billing/numbering.py",
        "tests/billing/test_numbering.py",
    ),
    Bug(
        "提醒邮件",
        "中文客户收到的付款提醒邮件标题是乱码",
        "邮件头里出现 =?unknown?q?...",
        "Subject 直接写入了 UTF-8 字节，没有按 RFC 2047 编码",
        "用 email.header.Header 编码标题，并补充了中文标题的测试",
        "tidemark/workers/email_queue.py",
        "tests/workers/test_email_queue.py",
    ),
    Bug(
        "汇率换算",
        "欧元发票换算成人民币后金额偏差很大",
        "换算结果比银行牌价高了 3.2 %",
        "汇率缓存的键里没有日期，一周前的汇率一直在用",
        "缓存键加上日期并按天失效，发票上同时记录汇率来源",
        "tidemark/money/rates.py",
        "tests/money/test_rates.py",
    ),
    Bug(
        "日期显示",
        "发票列表在 Safari 上把日期显示成 Invalid Date",
        "new Date('2026-03-01 10:00') 在 Safari 中返回 Invalid Date",
        "后端返回的时间字符串缺少 T 分隔符，不是标准的 ISO 8601",
        "后端统一返回 ISO 8601 时间，前端用 date-fns 的 parseISO 解析",
        "web/src/utils/dates.ts",
        "web/src/utils/dates.test.ts",
    ),
]

ZH_DECISIONS = [
    Decision(
        "前端的状态管理用什么",
        "Redux、Zustand 和 React Query",
        "服务端数据用 React Query，组件内部状态用 useState",
        "缓存、重试和失效都是现成的，样板代码少很多",
    ),
    Decision(
        "测试要不要继续用 SQLite",
        "内存 SQLite 和 Docker 里的 Postgres",
        "涉及数据库的测试全部改用 testcontainers 启动的 Postgres",
        "SQLite 掩盖了两个 JSONB 相关的缺陷，直到预发环境才发现",
    ),
    Decision(
        "发布节奏怎么定",
        "随时发布和固定发布日",
        "每周二上午发布，周五不上线",
        "出问题时整个团队都在，周末不用值班救火",
    ),
    Decision(
        "日志用什么格式",
        "纯文本和 JSON",
        "统一输出 JSON 日志，每行带 request_id",
        "可以在 Loki 里按一个请求把 API 和 worker 的日志串起来",
    ),
]

ZH_REVIEW_ASKS = ["一个解释加锁原因的注释", "空列表情况的测试", "更清楚的函数名", "一条变更日志"]

ZH_PREFERENCES = [
    ("代码评审", "代码评审时先看测试，再看实现"),
    ("回答", "回答尽量简短，先给结论再解释"),
    ("提交信息", "提交信息用英文写，PR 描述可以用中文"),
    ("依赖", "没有讨论过之前不要引入新的依赖"),
]


# --- turns ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """One turn's content: what the user asked, the journal bullets, and the tool call behind it."""

    prompt: str
    bullets: list[str]
    command: str
    output: str


Builder = Callable[[random.Random, int], Episode]


def _pick(rng: random.Random, seq: Sequence[str]) -> str:
    return seq[rng.randrange(len(seq))]


def _ticket(rng: random.Random) -> str:
    return f"TM-{rng.randrange(1200, 4800)}"


def _en_extras(rng: random.Random) -> list[str]:
    """Bullets that can follow any English turn, in a random order."""
    command, output = COMMANDS[rng.randrange(len(COMMANDS))]
    person = _pick(rng, PEOPLE)
    extras = [
        f"{person} reviewed PR #{rng.randrange(300, 2200)} and asked for {_pick(rng, REVIEW_ASKS)}; "
        "Claude added it in a follow-up commit.",
        f"Ran `{command}`: {output}.",
        f"Deployed to staging with the usual Helm upgrade; {_pick(rng, VERIFICATIONS)}.",
        f"Opened {_ticket(rng)} for the follow-up and assigned it to {_pick(rng, PEOPLE)}.",
        f"Time spent: about {rng.randrange(2, 12) * 10} minutes, most of it reproducing the problem locally.",
        f"CI on the branch: {rng.randrange(180, 260)} tests passed, lint and mypy clean, build "
        f"{rng.randrange(4, 15)} min.",
        f"User asked Claude to post a short summary in {_pick(rng, CHANNELS)} for {_pick(rng, PEOPLE)}.",
        "Claude left a TODO comment pointing at the ticket instead of widening this change.",
    ]
    rng.shuffle(extras)
    return extras


def _bug_en(rng: random.Random, i: int) -> Episode:
    b = BUGS[i]
    command = f"pytest -q {b.test}"
    reporter = rng.choice(
        ["User reported that", f"{_pick(rng, PEOPLE)} flagged in {_pick(rng, CHANNELS)} that"]
    )
    bullets = [
        f"{reporter} {b.symptom}.",
        f"Claude reproduced it locally; the log showed `{b.error}`.",
        f"Root cause: {b.cause} (`{b.path}`).",
        f"Fix: {b.fix}.",
        f"Added a regression test in `{b.test}`; `{command}` passes ({rng.randrange(4, 40)} tests).",
    ]
    prompt = f"Can you look into this? {b.symptom[0].upper()}{b.symptom[1:]}. The error is: {b.error}"
    return Episode(prompt, bullets, command, f"{rng.randrange(4, 40)} passed in {rng.uniform(0.5, 9):.2f}s")


def _decision_en(rng: random.Random, i: int) -> Episode:
    d = DECISIONS[i]
    person = _pick(rng, PEOPLE)
    bullets = [
        f"User asked {d.question}; the candidates were {d.options}.",
        f"Claude listed the trade-offs and {person} joined the discussion.",
        f"Decision: {d.choice}.",
        f"Why: {d.reason}.",
        f"Recorded it as ADR {rng.randrange(7, 40):03d} in `docs/adr/` and linked it from {_ticket(rng)}.",
    ]
    prompt = f"We need to decide {d.question}. Options: {d.options}. What do you recommend?"
    command = "ls docs/adr"
    return Episode(prompt, bullets, command, "000-template.md  001-monorepo.md  ...")


def _slow_en(rng: random.Random, i: int) -> Episode:
    s = SLOWNESS[i]
    command = "py-spy record -o profile.svg -- python -m tidemark.bench"
    bullets = [
        f"User asked why {s.target} is slow ({s.before}).",
        f"Claude profiled it with py-spy and `EXPLAIN ANALYZE`: {s.cause}.",
        f"Change in `{s.path}`: {s.fix}.",
        f"Measured again on staging: {s.before} -> {s.after}.",
    ]
    prompt = f"{s.target} takes {s.before}. Can you find out why and make it faster?"
    return Episode(
        prompt,
        bullets,
        command,
        f"Wrote flamegraph data to 'profile.svg'. Samples: {rng.randrange(2000, 20000)}",
    )


def _feature_en(rng: random.Random, i: int) -> Episode:
    f = FEATURES[i]
    command = "pytest -q tests -k " + f.path.rsplit("/", 1)[-1].removesuffix(".py").removesuffix(".tsx")
    bullets = [
        f"User asked for {f.name} ({_ticket(rng)}).",
        f"Claude implemented it as {f.work}.",
        f"Main change in `{f.path}`; {rng.randrange(2, 9)} files touched, +{rng.randrange(80, 390)} "
        f"-{rng.randrange(5, 60)} lines.",
        f"Behind the feature flag `{f.name.replace(' ', '_').replace('-', '_')}` until {_pick(rng, PEOPLE)} "
        "has tried it on staging.",
    ]
    prompt = f"Please add {f.name}. Keep it behind a feature flag for now."
    return Episode(prompt, bullets, command, f"{rng.randrange(5, 30)} passed in {rng.uniform(1, 12):.2f}s")


def _incident_en(rng: random.Random, i: int) -> Episode:
    n = INCIDENTS[i]
    bullets = [
        f"Incident: {n.event}.",
        f"Detected by {n.detected}.",
        f"Mitigation: {n.mitigation}.",
        f"Follow-up agreed in the post-mortem: {n.follow_up} ({_ticket(rng)}).",
        "User asked Claude to draft the post-mortem; it is in `docs/postmortems/`.",
    ]
    prompt = f"We had an incident: {n.event}. Help me write up the timeline and the follow-ups."
    return Episode(
        prompt, bullets, "kubectl -n tidemark get events --sort-by=.lastTimestamp", "No resources found"
    )


def _preference_en(rng: random.Random, i: int) -> Episode:
    topic, said, text = PREFERENCES[i]
    bullets = [
        f"User preference ({topic}): the user {text}.",
        "Claude acknowledged it and will follow it in this repository from now on.",
        f"Also noted in `CONTRIBUTING.md` after {_pick(rng, PEOPLE)} agreed.",
    ]
    prompt = f"A rule for this repository from now on ({topic}): {said}."
    return Episode(
        prompt, bullets, "git log --oneline -5", "a1c9e2f fix(billing): round tax once per invoice"
    )


def _zh_extras(rng: random.Random) -> list[str]:
    command, output = COMMANDS[rng.randrange(len(COMMANDS))]
    extras = [
        f"{_pick(rng, PEOPLE)} 评审了 PR #{rng.randrange(300, 2200)}，要求补充{_pick(rng, ZH_REVIEW_ASKS)}。",
        f"运行 `{command}`：{output}。",
        "已经部署到预发环境，冒烟测试全部通过。",
        f"后续工作记在 {_ticket(rng)}，下周跟进。",
        f"大约花了 {rng.randrange(2, 12) * 10} 分钟，大部分时间用在本地复现。",
        "在代码里留了 TODO 注释，指向对应的工单。",
    ]
    rng.shuffle(extras)
    return extras


def _bug_zh(rng: random.Random, i: int) -> Episode:
    b = ZH_BUGS[i]
    command = f"pytest -q {b.test}"
    bullets = [
        f"用户反馈：{b.symptom}。",
        f"Claude 在本地复现，日志里是 `{b.error}`。",
        f"根本原因：{b.cause}（`{b.path}`）。",
        f"修复：{b.fix}。",
        f"在 `{b.test}` 里加了回归测试，`{command}` 通过。",
    ]
    prompt = f"帮我看一下这个问题：{b.symptom}。报错是 {b.error}"
    return Episode(prompt, bullets, command, f"{rng.randrange(4, 40)} passed in {rng.uniform(0.5, 9):.2f}s")


def _decision_zh(rng: random.Random, i: int) -> Episode:
    d = ZH_DECISIONS[i]
    bullets = [
        f"用户问{d.question}，候选方案有 {d.options}。",
        f"Claude 比较了各自的优缺点，{_pick(rng, PEOPLE)} 也参与了讨论。",
        f"决定：{d.choice}。",
        f"理由：{d.reason}。",
        f"记录为 ADR {rng.randrange(7, 40):03d}，放在 `docs/adr/` 目录下。",
    ]
    prompt = f"{d.question}？我们在 {d.options} 之间犹豫，你的建议是什么？"
    return Episode(prompt, bullets, "ls docs/adr", "000-template.md  001-monorepo.md  ...")


def _preference_zh(rng: random.Random, i: int) -> Episode:
    topic, text = ZH_PREFERENCES[i]
    bullets = [
        f"用户偏好（{topic}）：{text}。",
        "Claude 已确认，以后在这个仓库里都按这个习惯来。",
    ]
    prompt = f"关于{topic}：{text}，以后都这样做。"
    return Episode(
        prompt, bullets, "git log --oneline -3", "a1c9e2f fix(billing): round tax once per invoice"
    )


#: Turn kinds: name -> (builder, number of records, weight when drawn at random).
EN_KINDS: dict[str, tuple[Builder, int, float]] = {
    "bug": (_bug_en, len(BUGS), 4.0),
    "decision": (_decision_en, len(DECISIONS), 2.0),
    "slow": (_slow_en, len(SLOWNESS), 1.5),
    "feature": (_feature_en, len(FEATURES), 2.0),
    "incident": (_incident_en, len(INCIDENTS), 0.8),
    "preference": (_preference_en, len(PREFERENCES), 0.7),
}
ZH_KINDS: dict[str, tuple[Builder, int, float]] = {
    "bug": (_bug_zh, len(ZH_BUGS), 4.0),
    "decision": (_decision_zh, len(ZH_DECISIONS), 2.0),
    "preference": (_preference_zh, len(ZH_PREFERENCES), 0.7),
}

#: The query set and, for each query, the turn that answers it (language, kind, record).
#: Each of these turns is placed in the corpus on purpose; the same records also come up at random.
ANSWERS: list[tuple[str, str, str, int]] = [
    ("why were Stripe webhooks processed twice", "en", "bug", 0),
    ("VAT rounding off by one cent", "en", "bug", 1),
    ("how do we store money amounts in the database", "en", "decision", 0),
    ("数据库连接池耗尽", "zh", "bug", 1),
    ("Excel CSV import fails with UnicodeDecodeError", "en", "bug", 2),
    ("migration lock timeout on the invoices table", "en", "bug", 3),
    ("which PDF renderer did we choose and why", "en", "decision", 1),
    ("API pods OOMKilled", "en", "bug", 4),
    ("为什么选择 React Query 做状态管理", "zh", "decision", 0),
    ("slow invoice list endpoint N+1 query", "en", "slow", 0),
    ("monthly invoices generated twice by the cron job", "en", "bug", 5),
    ("what size should pull requests be", "en", "preference", 0),
    ("退款测试为什么不稳定", "zh", "bug", 0),
    ("TLS certificate expired incident", "en", "incident", 0),
]
QUERIES = [query for query, *_ in ANSWERS]


def _episode(rng: random.Random, zh: bool, planted: tuple[str, int] | None) -> Episode:
    kinds = ZH_KINDS if zh else EN_KINDS
    if planted is None:
        names = list(kinds)
        name = rng.choices(names, weights=[kinds[n][2] for n in names])[0]
        record = rng.randrange(kinds[name][1])
    else:
        name, record = planted
    return kinds[name][0](rng, record)


def _body(rng: random.Random, episode: Episode, zh: bool) -> list[str]:
    """The turn's bullets: the episode's own, then extras up to a drawn length (never over the limit)."""
    low, high = ZH_TARGET if zh else EN_TARGET
    target = rng.randint(low, high)
    lines: list[str] = []
    size = 0
    for text in episode.bullets:  # the episode's own bullets, while they fit
        if size + len(text) + 3 > BODY_LIMIT:
            break
        lines.append(f"- {text}")
        size += len(text) + 3
    for text in _zh_extras(rng) if zh else _en_extras(rng):  # then extras up to the drawn length
        if size >= target or size + len(text) + 3 > BODY_LIMIT:
            break
        lines.append(f"- {text}")
        size += len(text) + 3
    return lines


# --- writing --------------------------------------------------------------------------------------


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _hhmm(minute: int) -> str:
    minute %= 24 * 60
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` items over ``parts`` buckets, each at least 1, sizes varying by about ±50 %."""
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    spare = total - parts
    shares = [spare * w / sum(weights) for w in weights]
    sizes = [1 + int(s) for s in shares]
    # hand out what rounding down left over, largest remainder first (ties by position)
    order = sorted(range(parts), key=lambda k: (int(shares[k]) - shares[k], k))
    for k in order[: total - sum(sizes)]:
        sizes[k] += 1
    return sizes


class _Transcript:
    """One session's Claude Code JSONL: records chained by ``parentUuid``, one user prompt per turn."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.records: list[dict[str, object]] = []
        self.parent: str | None = None

    def _add(self, kind: str, uid: str, at: dt.datetime, message: dict[str, object]) -> None:
        self.records.append(
            {
                "parentUuid": self.parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": PROJECT_DIR,
                "sessionId": self.session,
                "version": "2.0.31",
                "gitBranch": "main",
                "type": kind,
                "message": message,
                "uuid": uid,
                "timestamp": at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            }
        )
        self.parent = uid

    def turn(
        self, rng: random.Random, turn_id: str, at: dt.datetime, episode: Episode, bullets: list[str]
    ) -> None:
        tool = "toolu_" + uuid.UUID(int=rng.getrandbits(128)).hex[:24]
        self._add("user", turn_id, at, {"role": "user", "content": episode.prompt})
        self._add(
            "assistant",
            _uuid(rng),
            at + dt.timedelta(seconds=4),
            {
                "id": "msg_" + uuid.UUID(int=rng.getrandbits(128)).hex[:24],
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "text", "text": "Let me check that first."},
                    {"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": episode.command}},
                ],
            },
        )
        self._add(
            "user",
            _uuid(rng),
            at + dt.timedelta(seconds=9),
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool, "content": episode.output}],
            },
        )
        summary = "\n".join(line[2:] for line in bullets[1:]) or bullets[0][2:]
        self._add(
            "assistant",
            _uuid(rng),
            at + dt.timedelta(seconds=40),
            {
                "id": "msg_" + uuid.UUID(int=rng.getrandbits(128)).hex[:24],
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": summary}],
            },
        )

    def text(self) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records)


def _planting(n_chunks: int, zh_ratio: float) -> dict[int, tuple[str, str, int]]:
    """Global turn index -> (language, kind, record) of the turns that answer the queries, spread evenly."""
    answers = [(lang, kind, rec) for _, lang, kind, rec in ANSWERS if lang == "en" or zh_ratio > 0]
    if n_chunks < len(answers):
        return {}
    return {(2 * k + 1) * n_chunks // (2 * len(answers)): answer for k, answer in enumerate(answers)}


def generate(
    out: Path, files: int = 60, chunks: int = 2000, seed: int = 7, zh: float = 0.1
) -> dict[str, int]:
    """Write the corpus under ``out`` and return its statistics (files, sessions, chunks, ...)."""
    if chunks < 1 or files < 1:
        raise ValueError("--files and --chunks must be at least 1")
    if not 0.0 <= zh <= 1.0:
        raise ValueError("--zh must be between 0 and 1")
    files = min(files, chunks)  # every file holds at least one turn
    out = out.resolve()
    memory, sessions = out / "memory", out / "sessions"
    memory.mkdir(parents=True, exist_ok=True)
    sessions.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    planted = _planting(chunks, zh)
    stats = {
        "files": 0,
        "sessions": 0,
        "chunks": 0,
        "zh_chunks": 0,
        "chars": 0,
        "max_chunk_chars": 0,
        "bytes": 0,
    }
    day = FIRST_DAY
    turn_index = 0
    for turns_in_file in _split(chunks, files, rng):
        day += dt.timedelta(days=0 if stats["files"] == 0 else rng.choice([1, 1, 1, 1, 2, 3]))
        n_sessions = min(turns_in_file, rng.randint(1, 4))
        minute = rng.randint(8 * 60, 10 * 60)
        step = max(1, min(12, (23 * 60 - minute) // (turns_in_file + 4 * n_sessions)))
        lines = [f"# {day.isoformat()}", ""]
        for turns_in_session in _split(turns_in_file, n_sessions, rng):
            session = _uuid(rng)
            transcript = _Transcript(session)
            path = sessions / f"{session}.jsonl"
            minute += rng.randint(step, 4 * step)
            lines += [f"## Session {_hhmm(minute)}", ""]
            for _ in range(turns_in_session):
                minute += rng.randint(1, step)
                answer = planted.get(turn_index)
                is_zh = answer[0] == "zh" if answer else rng.random() < zh
                episode = _episode(rng, is_zh, answer[1:] if answer else None)
                bullets = _body(rng, episode, is_zh)
                turn_id = _uuid(rng)
                block = [
                    f"### {_hhmm(minute)}",
                    f"<!-- session:{session} turn:{turn_id} transcript:{path} -->",
                    *bullets,
                ]
                size = len("\n".join(block))
                if size > MAX_TURN_CHARS:
                    raise SystemExit(
                        f"a turn of {size} characters does not fit in one chunk: use a shorter OUT path"
                    )
                at = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=minute % (24 * 60))
                transcript.turn(rng, turn_id, at, episode, bullets)
                lines += [*block, ""]
                stats["chunks"] += 1
                stats["zh_chunks"] += is_zh
                stats["chars"] += size
                stats["max_chunk_chars"] = max(stats["max_chunk_chars"], size)
                turn_index += 1
            path.write_text(transcript.text(), encoding="utf-8")
            stats["sessions"] += 1
        data = "\n".join(lines).rstrip("\n") + "\n"
        (memory / f"{day.isoformat()}.md").write_text(data, encoding="utf-8")
        stats["files"] += 1
        stats["bytes"] += len(data.encode("utf-8"))
    stats["mean_chunk_chars"] = round(stats.pop("chars") / stats["chunks"])
    return stats


_MARK = re.compile(r" \(re-checked, pass \d+\)$")


def edit_one(out: Path, seed: int = 7) -> Path:
    """Change one bullet and append one turn in the middle journal; return that file.

    Each call is a new edit of the same file (a later call changes another bullet and appends another
    turn), so repeated incremental re-index measurements each see one changed file.
    """
    out = out.resolve()
    journals = sorted((out / "memory").glob("*.md"))
    if not journals:
        raise SystemExit(f"no journals under {out / 'memory'}: generate the corpus first")
    target = journals[len(journals) // 2]
    rng = random.Random(f"edit-one/{seed}")
    session = _uuid(rng)
    lines = target.read_text(encoding="utf-8").rstrip("\n").split("\n")
    done = sum(f"session:{session} " in line for line in lines)  # earlier edits of this file
    # the last bullet of one original turn; a bullet edited before gets a new pass number
    cutoff = next((k for k, line in enumerate(lines) if f"session:{session} " in line), len(lines))
    padded = [*lines, ""]
    turn_ends = [k for k in range(cutoff) if padded[k].startswith("- ") and padded[k + 1] == ""]
    if not turn_ends:
        raise SystemExit(f"{target} has no bullets to edit")
    k = turn_ends[done % len(turn_ends)]
    lines[k] = _MARK.sub("", lines[k]) + f" (re-checked, pass {done + 1})"
    turn_rng = random.Random(f"edit-one/{seed}/{done}")
    turn_id = _uuid(turn_rng)
    transcript = out / "sessions" / f"{session}.jsonl"
    minute = 23 * 60 + min(done, 59)
    if done == 0:
        lines += ["", f"## Session {_hhmm(minute)}"]
    episode = Episode(
        f"Quick check number {done + 1}: is everything from today still green?",
        [
            f"User asked for status check {done + 1} at the end of the day.",
            "Claude re-ran the billing tests after the last edit; everything is still green.",
        ],
        "pytest -q tests/billing",
        "212 passed in 47.90s",
    )
    bullets = [f"- {b}" for b in episode.bullets]
    lines += [
        "",
        f"### {_hhmm(minute)}",
        f"<!-- session:{session} turn:{turn_id} transcript:{transcript} -->",
        *bullets,
    ]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    record = _Transcript(session)
    if transcript.is_file():  # continue the chain of earlier edits
        previous = transcript.read_text(encoding="utf-8").splitlines()
        record.parent = str(json.loads(previous[-1])["uuid"]) if previous else None
    day = dt.date.fromisoformat(target.stem)
    record.turn(
        turn_rng,
        turn_id,
        dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=minute),
        episode,
        bullets,
    )
    with transcript.open("a", encoding="utf-8") as f:
        f.write(record.text())
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gen_corpus.py",
        description="Write memsearch's deterministic benchmark corpus (agent journals and transcripts).",
    )
    parser.add_argument("out", type=Path, help="output folder (memory/ and sessions/ are created in it)")
    parser.add_argument("--files", type=int, default=60, help="daily journal files (default 60)")
    parser.add_argument("--chunks", type=int, default=2000, help="turns, one chunk each (default 2000)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--zh", type=float, default=0.1, help="share of Chinese turns (default 0.1)")
    parser.add_argument("--edit-one", action="store_true", help="edit one journal of an existing corpus")
    parser.add_argument("--queries", action="store_true", help="print the query set, one per line")
    args = parser.parse_args(argv)
    if args.queries:
        print("\n".join(QUERIES))
        return 0
    if args.edit_one:
        print(f"edited {edit_one(args.out, args.seed)}")
        return 0
    if any((args.out / "memory").glob("*.md")):
        raise SystemExit(f"{args.out / 'memory'} already holds journals; remove them first")
    try:
        stats = generate(args.out, args.files, args.chunks, args.seed, args.zh)
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
