"""Write Almanac task plugins in Python.

A plugin is a module that defines a subclass of `Task` and exports it::

    import almanac_guest as almanac

    class DailyPoints(almanac.Task):
        def describe(self):
            return (almanac.TaskInfo("daily-points", "0 0 * * *", "Asia/Shanghai")
                    .writes("accounts", "points_ledger")
                    .setting("points", "10", "points each account gets per day"))

        def plan(self, slot, tx, after, limit):
            after = int(after) if after is not None else -(2**63)
            rows = tx.query("SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2", after, limit)
            return [str(row[0]) for row in rows]

        def run(self, job, tx):
            ...

    Task = almanac.export(DailyPoints)

`componentize-py -d wit -w task-plugin componentize -p guest-sdk/python -p . app -o app.wasm`
builds it (scripts/build-plugins.sh does, for plugins/*-py). The host treats the component
like any other: same sandbox, limits, database role and statement policy.
"""
import datetime
import decimal
import json as _json
from typing import Any, List, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import task as _wit
from wit_world.imports import business as _business
from wit_world.imports import config as _config
from wit_world.imports import jobs as _jobs
from wit_world.imports import log as _log
from wit_world.imports import outbox as _outbox
from wit_world.imports import types as _types

__all__ = ["Task", "TaskInfo", "Slot", "Job", "Tx", "Row", "Error", "DbError", "config", "business", "log", "export"]


class Error(Exception):
    """Why a call failed: stored as the job's last error; `retryable` says whether to try again."""

    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    @staticmethod
    def permanent(message: Any) -> "Error":
        return Error(str(message), False)


# `Error.retryable("...")` makes one (as in the Rust SDK); on an instance, `retryable` is
# the flag its constructor set.
Error.retryable = staticmethod(lambda message: Error(str(message), True))  # type: ignore[assignment]


class DbError(Error):
    """A statement failed (with its SQLSTATE) or the host refused it (without)."""

    def __init__(self, error: Any):
        prefix = f"database error {error.sqlstate}: " if error.sqlstate else ""
        super().__init__(prefix + error.message, error.retryable)
        self.sqlstate = error.sqlstate


class Slot:
    """One business period: `start`/`end` as aware datetimes (UTC), `label` (= `period`:
    the period's name in the business zone, e.g. "2026-11" for a monthly task, the same
    across schedule changes), `zone`."""

    def __init__(self, slot: Any):
        self.raw = slot
        self.start = _from_micros(slot.start)
        self.end = _from_micros(slot.end)
        self.label = slot.label
        self.period = slot.label
        self.zone = slot.zone


class Job:
    """One unit of work: `task`, `slot`, `period` (what to key ledgers and outbox messages
    by), `key`, `attempt` and the parsed JSON `payload` (or None)."""

    def __init__(self, job: Any):
        self.task = job.task
        self.slot = Slot(job.slot)
        self.period = self.slot.period
        self.key = job.key
        self.attempt = job.attempt
        self.payload = _json.loads(job.payload) if job.payload is not None else None


class Row:
    """One result row: by position (`row[0]`) or by column name (`row["id"]`)."""

    def __init__(self, columns: List[str], values: List[Any]):
        self._columns = columns
        self._values = [_from_value(v) for v in values]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            return self._values[self._columns.index(index)]
        return self._values[index]

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return "Row(" + ", ".join(f"{c}={v!r}" for c, v in zip(self._columns, self._values)) + ")"


class Tx:
    """The transaction the call is lent. Parameters are Python values: None, bool, int,
    float, str, bytes, datetime (aware), Decimal, dict/list (JSON)."""

    def __init__(self, tx: Any):
        self._tx = tx

    def query(self, sql: str, *params: Any) -> List[Row]:
        try:
            rows = self._tx.query(sql, [_to_value(p) for p in params])
        except Err as e:
            raise DbError(e.value) from None
        return [Row(rows.columns, r) for r in rows.rows]

    def execute(self, sql: str, *params: Any) -> int:
        try:
            return self._tx.execute(sql, [_to_value(p) for p in params])
        except Err as e:
            raise DbError(e.value) from None

    def publish(self, topic: str, key: str, payload: Any, content_type: str = "application/json") -> bool:
        """Write a message into the outbox in this transaction; False if (topic, key) existed.
        A dict or list payload is sent as JSON; bytes and str as they are."""
        if isinstance(payload, (dict, list)):
            body = _json.dumps(payload).encode()
        elif isinstance(payload, str):
            body = payload.encode()
        else:
            body = bytes(payload)
        try:
            outcome = _outbox.publish(self._tx, topic, key, body, content_type)
        except Err as e:
            raise DbError(e.value) from None
        return outcome == _outbox.PublishOutcome.PUBLISHED

    def enqueue(self, task: str, slot: datetime.datetime, key: str, payload: Any = None,
                run_after: Optional[datetime.datetime] = None) -> bool:
        """Enqueue one job of another task in this transaction; False if it existed.
        `slot` is an instant of its business period: derive it from the current job
        (`job.slot.start`), never from the clock, so that a retry names the same job.
        The task must be one `TaskInfo.enqueues` names. A dict or list payload is sent
        as JSON, a str as it is."""
        body = _json.dumps(payload) if isinstance(payload, (dict, list)) else payload
        job = _jobs.NewJob(task=task, slot=_to_micros(slot), key=key, payload=body,
                           run_after=None if run_after is None else _to_micros(run_after))
        try:
            return _jobs.enqueue(self._tx, job)
        except Err as e:
            raise DbError(e.value) from None


class TaskInfo:
    """The task's identity and defaults (WIT `task-info`), built step by step."""

    def __init__(self, name: str, schedule: Optional[str], zone: str = "UTC"):
        self._info = _wit.TaskInfo(
            name=name, version="0.0.0", schedule=schedule, zone=zone, catch_up=_wit.CatchUp_All(),
            max_attempts=5, timeout_ms=30_000, tables=[], setup=[], settings=[], calls=[], enqueues=[], reuse=0,
        )

    @staticmethod
    def on_demand(name: str) -> "TaskInfo":
        """A task without a schedule: its jobs come only from enqueues."""
        return TaskInfo(name, None)

    def version(self, version: str) -> "TaskInfo":
        self._info.version = version
        return self

    def catch_up(self, policy: str, window_seconds: int = 0) -> "TaskInfo":
        """'all', 'latest' or 'window' (with window_seconds)."""
        self._info.catch_up = {"all": _wit.CatchUp_All(), "latest": _wit.CatchUp_Latest(), "window": _wit.CatchUp_Window(window_seconds)}[policy]
        return self

    def max_attempts(self, attempts: int) -> "TaskInfo":
        self._info.max_attempts = attempts
        return self

    def timeout_ms(self, ms: int) -> "TaskInfo":
        self._info.timeout_ms = ms
        return self

    def reads(self, *tables: str) -> "TaskInfo":
        return self._tables(tables, _wit.Access.READ)

    def writes(self, *tables: str) -> "TaskInfo":
        return self._tables(tables, _wit.Access.WRITE)

    def _tables(self, tables: Any, access: Any) -> "TaskInfo":
        for name in tables:
            self._info.tables = [t for t in self._info.tables if t.name != name] + [_wit.TableAccess(name, access)]
        return self

    def reuse(self, jobs: int) -> "TaskInfo":
        """Let one instance run up to `jobs` jobs of this task in a row instead of a fresh
        one per job. What a job leaves in the instance (a module-level variable, a cache)
        is then seen by the next jobs it runs: declare it only when a job depends on
        nothing but its arguments and the database. The host starts a fresh instance
        after `jobs` jobs, after any job that fails, and when its memory has grown past
        half the cap."""
        self._info.reuse = jobs
        return self

    def enqueues(self, *tasks: str) -> "TaskInfo":
        """The tasks whose jobs this plugin enqueues (`Tx.enqueue`): its role may enqueue
        into these and no others."""
        self._info.enqueues += [t for t in tasks if t not in self._info.enqueues]
        return self

    def calls(self, *functions: str) -> "TaskInfo":
        """Functions of the database the plugin's SQL calls beyond the host's built-in
        allowlist, each with its schema (`"public.credit"`), called as written. A declared
        SECURITY DEFINER function runs with its owner's rights."""
        self._info.calls += [f for f in functions if f not in self._info.calls]
        return self

    def setup(self, *statements: str) -> "TaskInfo":
        self._info.setup = list(statements)
        return self

    def setting(self, name: str, default: str, doc: str) -> "TaskInfo":
        self._info.settings.append(_wit.Setting(name, default, doc))
        return self

    def required_setting(self, name: str, doc: str) -> "TaskInfo":
        self._info.settings.append(_wit.Setting(name, None, doc))
        return self


class Task:
    """Subclass it: `describe`, `plan` (optional: the default plans no keys) and `run`."""

    def describe(self) -> TaskInfo:
        raise NotImplementedError

    def plan(self, slot: Slot, tx: Tx, after: Optional[str], limit: int) -> List[str]:
        return []

    def run(self, job: Job, tx: Tx) -> None:
        raise NotImplementedError


class config:
    """The operator's settings (`[tasks.<name>.settings]`)."""

    @staticmethod
    def get(name: str) -> Optional[str]:
        return _config.get(name)


class business:
    """The business day of the slot the current `plan` or `run` is for (holiday calendars)."""

    @staticmethod
    def today() -> Optional[Any]:
        """The current slot's business day, or None for a task without holiday calendars.

        Its fields: `nominal` (the day the slot is for, "YYYY-MM-DD", before any roll),
        `date` (the business day it runs on), `day_of_month` (its place among the month's
        business days, from 1), `last_of_month`, and `calendars` ("name@version" each).
        """
        return _business.today()


class log:
    """Lines in the host's log, under the job's task, slot and key."""

    @staticmethod
    def info(message: str) -> None:
        _log.log(_log.Level.INFO, message)

    @staticmethod
    def warn(message: str) -> None:
        _log.log(_log.Level.WARN, message)

    @staticmethod
    def error(message: str) -> None:
        _log.log(_log.Level.ERROR, message)


def export(cls: type) -> type:
    """The class componentize-py exports as the component's `task`: it calls `cls`."""
    plugin = cls()

    def failed(e: Error) -> Err:
        return Err(_wit.TaskError(e.message, e.retryable))

    class Exported(exports.Task):
        def describe(self) -> Any:
            return plugin.describe()._info

        def plan(self, slot: Any, tx: Any, after_key: Optional[str], limit: int) -> List[str]:
            try:
                return list(plugin.plan(Slot(slot), Tx(tx), after_key, limit))
            except Error as e:
                raise failed(e) from None

        def run(self, job: Any, tx: Any) -> None:
            try:
                plugin.run(Job(job), Tx(tx))
            except Error as e:
                raise failed(e) from None

    return Exported


def _to_value(p: Any) -> Any:
    if p is None:
        return _types.Value_Null()
    if isinstance(p, bool):
        return _types.Value_Boolean(p)
    if isinstance(p, int):
        return _types.Value_Int(p)
    if isinstance(p, float):
        return _types.Value_Float(p)
    if isinstance(p, str):
        return _types.Value_Text(p)
    if isinstance(p, (bytes, bytearray)):
        return _types.Value_Bytes(bytes(p))
    if isinstance(p, datetime.datetime):
        return _types.Value_Timestamp(_to_micros(p))
    if isinstance(p, decimal.Decimal):
        return _types.Value_Numeric(str(p))
    if isinstance(p, (dict, list)):
        return _types.Value_Json(_json.dumps(p))
    raise Error.permanent(f"a parameter of type {type(p).__name__} has no SQL form")


def _from_value(v: Any) -> Any:
    if isinstance(v, _types.Value_Null):
        return None
    if isinstance(v, _types.Value_Timestamp):
        return _from_micros(v.value)
    if isinstance(v, _types.Value_Json):
        return _json.loads(v.value)
    if isinstance(v, _types.Value_Numeric):
        return decimal.Decimal(v.value)
    return v.value


def _to_micros(p: datetime.datetime) -> int:
    if p.tzinfo is None:
        raise Error.permanent(f"a naive datetime ({p}) is ambiguous: give it a time zone")
    delta = p - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_micros(micros: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=micros)
