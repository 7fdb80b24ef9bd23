"""Test an Almanac task plugin from its own project, with pytest.

    from almanac_testing import Almanac

    def test_records_one_run_per_slot():
        almanac = Almanac(build=["sh", "build.sh"])   # built once per session; a fresh database
        almanac.sql("CREATE TABLE accounts (id int PRIMARY KEY, points int NOT NULL)")
        tried = almanac.run("hello", "2026-01-01T00:00:00Z", "run")
        assert tried.ok, tried.report
        assert almanac.query("SELECT greeting FROM hello_runs") == [["hello"]]

Each `Almanac` is a new database in a private PostgreSQL cluster under the project's
`.almanac/` (started on first use with the system's server binaries), made by
`almanac scratch`; the plugin runs through `almanac try --commit` / `almanac plan`, so it
is loaded, sandboxed and confined to its role exactly as a host does it. The `almanac`
binary is `$ALMANAC`, else the one built in the Almanac checkout this file comes from,
else `almanac` on `PATH`. Nothing but the standard library.
"""
import itertools
import json
import os
import pathlib
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

__all__ = ["Almanac", "Tried"]

_databases = itertools.count()
_built = set()


@dataclass
class Tried:
    """What a `run`, `plan` or `apply` did: `ok`, `keys` (for `plan`) and its report (for
    a dry run, every statement the plugin sent, with its parameters and what it did)."""

    ok: bool
    report: str
    keys: List[str] = field(default_factory=list)

    def __str__(self):
        return self.report


class Almanac:
    def __init__(self, build: Optional[Sequence[str]] = None, plugins: str = ".", project: str = "."):
        """A fresh database. `build` (a command, run once per test session in `project`)
        makes the component(s) `plugins` names: one component file or a folder of them
        (relative to `project`)."""
        self.project = pathlib.Path(project).resolve()
        if build is not None and tuple(build) not in _built:
            _check(list(build), cwd=self.project, env=os.environ)
            _built.add(tuple(build))
        self.plugins = (self.project / plugins).resolve()
        self.bin = _almanac_bin()
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        self.name = f"almanac_test_{next(_databases)}_{os.getpid()}"
        self.url = _check([self.bin, "scratch", self.name], cwd=self.project, env=env).stdout.decode().strip()
        self.config = None
        self._settings = {}

    def settings(self, task: str, values: dict) -> "Almanac":
        """Give `task` these settings (as `[tasks.<task>.settings]` of almanac.toml would)
        for this test's runs and plans from now on; later calls add to them. The test then
        runs by a configuration file of its own instead of the project's almanac.toml."""
        self._settings.setdefault(task, {}).update(values)
        text = "".join(
            f"[tasks.{_toml(t)}.settings]\n" + "".join(f"{_toml(k)} = {_toml(v)}\n" for k, v in given.items())
            for t, given in self._settings.items()
        )
        folder = self.project / ".almanac" / "settings"
        folder.mkdir(parents=True, exist_ok=True)
        self.config = folder / f"{self.name}.toml"
        self.config.write_text(text, encoding="utf-8")
        return self

    def run(self, task: str, slot: str, key: str, payload: Optional[str] = None) -> Tried:
        """`run` of job (task, slot, key), in a transaction committed if it succeeds."""
        extra = ["--payload", payload] if payload is not None else []
        return self._call(["try", task, "--slot", slot, "--key", key, *extra])

    def plan(self, task: str, slot: str) -> Tried:
        """`plan` of a slot (its keys in `Tried.keys`), committed if it succeeds."""
        return self._call(["plan", task, "--slot", slot, "--limit", "100000"])

    def apply(self) -> Tried:
        """Register the plugins' tasks as a deploy does (`almanac apply`: their setup,
        schedules, settings and `after`), so that a plugin's enqueue into another of them,
        and plan's "runs after" line, work as on a live database. Put the other tasks'
        components beside this one (`plugins` a folder)."""
        plugins = self.plugins
        if plugins.is_file():
            # `apply` reads a folder: one component file is given one of its own.
            folder = self.project / ".almanac" / "apply" / self.name
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plugins, folder / plugins.name)
            plugins = folder
        config = ["--config", str(self.config)] if self.config else []
        command = [self.bin, "apply", "--plugins", str(plugins), "--reason", "almanac-testing", *config]
        return _tried(subprocess.run(command, cwd=self.project, env=self._env(), capture_output=True))

    def jobs(self, task: str) -> List[List[str]]:
        """The jobs of `task` in the database (those the plugin enqueued, for one), in slot
        and key order: [slot, key, payload, run_after, status] as psql prints them."""
        quoted = task.replace("'", "''")
        return self.query(
            "SELECT slot, key, coalesce(payload::text, 'NULL'), run_after, status FROM almanac.jobs "
            f"WHERE task = '{quoted}' ORDER BY slot, key"
        )

    def sql(self, sql: str) -> None:
        """Statements run as the database's owner (tables the plugin reads, rows to start from)."""
        self._psql(sql)

    def query(self, sql: str) -> List[List[str]]:
        """A query's rows, every value as psql prints it (NULL as "NULL", times in UTC)."""
        out = self._psql(sql).decode()
        return [row.split("\x1f") for row in out.split("\0") if row]

    def _call(self, args: List[str]) -> Tried:
        config = ["--config", str(self.config)] if self.config else []
        out = subprocess.run([self.bin, *args, "--plugins", str(self.plugins), "--commit", *config], cwd=self.project, env=self._env(), capture_output=True)
        return _tried(out)

    def _psql(self, sql: str) -> bytes:
        args = ["psql", "--", "-X", "-q", "-A", "-t", "-0", "-F", "\x1f", "-P", "null=NULL", "-v", "ON_ERROR_STOP=1", "-c", sql]
        return _check([self.bin, *args], cwd=self.project, env={**self._env(), "PGTZ": "UTC"}).stdout

    def _env(self):
        return {**os.environ, "DATABASE_URL": self.url}


def _tried(out: subprocess.CompletedProcess) -> Tried:
    report = out.stdout.decode() + out.stderr.decode()
    keys = [line[len("  key: "):] for line in report.splitlines() if line.startswith("  key: ")]
    return Tried(ok=out.returncode == 0, report=report, keys=keys)


def _toml(text) -> str:
    """A TOML basic string: JSON's escapes are TOML's (non-ASCII kept as is, so no
    surrogate escapes), and DEL, which JSON leaves alone, escaped too."""
    return json.dumps(str(text), ensure_ascii=False).replace("\x7f", "\\u007F")


def _almanac_bin() -> str:
    if os.environ.get("ALMANAC"):
        return os.environ["ALMANAC"]
    checkout = pathlib.Path(__file__).resolve().parents[2] / "target" / "release" / "almanac"
    if checkout.exists():
        return str(checkout)
    return shutil.which("almanac") or "almanac"


def _check(command, cwd, env) -> subprocess.CompletedProcess:
    out = subprocess.run(command, cwd=cwd, env=env, capture_output=True)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, command))} failed:\n{out.stdout.decode()}{out.stderr.decode()}")
    return out
