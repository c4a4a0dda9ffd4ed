"""Maintenance tasks: PROJECT.md, USER.md and skill candidates kept current from the journals.

The daily journals are what happened; above them sit files that say what is true now. Three tasks
keep them (configured per platform under ``[plugins.<platform>.<task>]``):

- ``project_review`` rewrites ``PROJECT.md`` (what the project is, how it works, open threads);
- ``user_profile`` rewrites ``USER.md`` (the user's stable preferences and workflows);
- ``memory_to_skill`` drafts skill candidates from repeated procedures (``memsearch.skills``).

Each task is one row of :data:`TASKS` (what it shows the model, how its answer is applied); the
runner around them is shared:

- a task is *due* when enabled, its ``min_interval_hours`` has passed since its last success and
  the journals changed since then (a content digest of ``input_dir``), or when forced;
- one ``flock`` per memory folder (``.maintenance.lock``) means two sessions never run at once: the
  second finds the lock held and leaves; the state file (``.maintenance-state.json``, keys
  ``<platform>.<task>`` as in the original) is only read and written under it;
- a failure is recorded in the state (``last_error``, ``last_failed_at``) and retried on a later
  run (after at most an hour), and never raised into a hook;
- the model is the task's ``provider``: an ``[llm.providers.<name>]`` entry (openai, anthropic,
  gemini), or ``native`` — the host's own CLI, as the summariser uses it, so no API key is needed.
  API models may look things up with :func:`run_memory_command`: only ``memsearch search``,
  ``expand`` and ``transcript`` on this project's memory, arguments validated, no shell, a few
  calls with bounded output.

The session-start hook calls :func:`start_due_tasks` (a cheap check, then a detached
``memsearch maintenance run --hook-worker``) and :func:`session_context` (PROJECT.md and USER.md
for the model, within :data:`CONTEXT_CHARS`).

The package is split along those parts; this module re-exports their names, so
``from memsearch.maintenance import ...`` keeps working:

- :mod:`~memsearch.maintenance.tasks`: the task table and applying a model's answer;
- :mod:`~memsearch.maintenance.state`: paths, the journals' digest, the state file, the run lock;
- :mod:`~memsearch.maintenance.prompt`: building the prompt and parsing the answer;
- :mod:`~memsearch.maintenance.commands`: the read commands a model may run (validator, runner);
- :mod:`~memsearch.maintenance.model`: the model step (host CLI, OpenAI, Anthropic, Gemini loops);
- :mod:`~memsearch.maintenance.run`: running the due tasks under the lock;
- :mod:`~memsearch.maintenance.session`: the session-start side and indexing rewritten files;
- :mod:`~memsearch.maintenance.common`: the limits and small helpers the others share.
"""

from memsearch.maintenance.commands import (
    READ_COMMANDS,
    TRANSCRIPT_FIELDS,
    MemoryScope,
    anchored_transcripts,
    run_memory_command,
    validate_memory_command,
)
from memsearch.maintenance.common import (
    CONTEXT_CHARS,
    JOURNAL_FILES,
    LOCK_FILE,
    LOG_FILE,
    LOG_MAX,
    MAX_COMMAND_CHARS,
    MAX_OUTPUT_CHARS,
    MAX_PROMPT_CHARS,
    MAX_QUERY_CHARS,
    MAX_SKILLS,
    MAX_TOOL_CALLS,
    MAX_TOOL_OUTPUT,
    MODEL_TIMEOUT,
    NATIVE_MODELS,
    NATIVE_PROMPT_CHARS,
    RETRY_AFTER_HOURS,
    STATE_FILE,
    TOOL_NAME,
    TOOL_TIMEOUT,
    root_of,
)
from memsearch.maintenance.model import HOST_PREAMBLE, ask_model
from memsearch.maintenance.prompt import build_prompt, parse_answer, recent_journals
from memsearch.maintenance.run import Asker, run_tasks
from memsearch.maintenance.session import (
    due_tasks,
    index_files,
    run_in_progress,
    session_context,
    start_due_tasks,
)
from memsearch.maintenance.state import (
    check_due,
    input_digest,
    input_stamp,
    journal_paths,
    load_state,
    resolve_path,
    run_lock,
    state_key,
    task_paths,
    task_settings,
    utc_now,
    utc_stamp,
)
from memsearch.maintenance.tasks import TASKS, Outcome, Task, TaskRun

#: The clock and time stamps under their earlier names (tests read the state file with them).
_now = utc_now
_stamp = utc_stamp

__all__ = [
    "CONTEXT_CHARS",
    "HOST_PREAMBLE",
    "JOURNAL_FILES",
    "LOCK_FILE",
    "LOG_FILE",
    "LOG_MAX",
    "MAX_COMMAND_CHARS",
    "MAX_OUTPUT_CHARS",
    "MAX_PROMPT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SKILLS",
    "MAX_TOOL_CALLS",
    "MAX_TOOL_OUTPUT",
    "MODEL_TIMEOUT",
    "NATIVE_MODELS",
    "NATIVE_PROMPT_CHARS",
    "READ_COMMANDS",
    "RETRY_AFTER_HOURS",
    "STATE_FILE",
    "TASKS",
    "TOOL_NAME",
    "TOOL_TIMEOUT",
    "TRANSCRIPT_FIELDS",
    "Asker",
    "MemoryScope",
    "Outcome",
    "Task",
    "TaskRun",
    "anchored_transcripts",
    "ask_model",
    "build_prompt",
    "check_due",
    "due_tasks",
    "index_files",
    "input_digest",
    "input_stamp",
    "journal_paths",
    "load_state",
    "parse_answer",
    "recent_journals",
    "resolve_path",
    "root_of",
    "run_in_progress",
    "run_lock",
    "run_memory_command",
    "run_tasks",
    "session_context",
    "start_due_tasks",
    "state_key",
    "task_paths",
    "task_settings",
    "utc_now",
    "utc_stamp",
    "validate_memory_command",
]
