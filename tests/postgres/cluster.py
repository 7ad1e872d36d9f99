"""A throw-away PostgreSQL cluster for the tests and benchmarks (Debian's ``postgresql`` binaries).

:func:`find_bindir` locates ``initdb``/``pg_ctl`` (``GROUNDING_PG_BINDIR``, then
``/usr/lib/postgresql/<newest>/bin``, then ``pg_config --bindir``); None when PostgreSQL is not
installed (the tests that need it are then skipped, saying so). :class:`Cluster` runs
``initdb`` into a temporary folder and ``pg_ctl start`` on a free TCP port of 127.0.0.1 (and a
Unix socket in the same folder), as an unprivileged user: PostgreSQL refuses to run as root,
so under root the commands run through ``runuser -u postgres`` (Debian's package creates that
user). Authentication is ``trust`` (the cluster listens on localhost only and lives as long as
the test session). ``stop(mode)`` / ``start()`` let the failure tests take the server away
mid-scan (``fast``: clients are disconnected and their transactions roll back; ``immediate``:
the server dies and recovers from its WAL at the next start).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

DATABASE = "grounding_test"


def find_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    env = os.environ.get("GROUNDING_PG_BINDIR")
    candidates: list[Path] = [Path(env)] if env else []
    base = Path("/usr/lib/postgresql")
    if base.is_dir():
        versions = sorted((p for p in base.iterdir() if p.name.isdigit()), key=lambda p: int(p.name), reverse=True)
        candidates.extend(p / "bin" for p in versions)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout
            candidates.append(Path(out.strip()))
        except (OSError, subprocess.CalledProcessError):
            pass
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One initdb'd cluster in a temporary folder (see the module docstring)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.folder = Path(tempfile.mkdtemp(prefix="grounding-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres")
            os.chmod(self.folder, 0o755)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                  "--locale=C.UTF-8", "--no-sync")
        self.start()
        self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")

    def _run(self, tool: str, *args: str) -> str:
        done = subprocess.run([*self._as_user, str(self.bindir / tool), *args], capture_output=True,
                              text=True, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done.stdout

    @property
    def url(self) -> str:
        """The test database as a libpq URL (user ``postgres``, no password: trust)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def schema_url(self, schema: str | None = None) -> str:
        """:attr:`url` with its own ``search_path`` schema (created by the store on first
        use): one index per schema, so tests never see each other's rows.
        """
        schema = schema or "t_" + uuid.uuid4().hex[:16]
        return f"{self.url}?options=-csearch_path%3D{schema}"

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
                   " -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode`` (``smart``, ``fast`` or ``immediate``), waiting for it."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Run SQL through ``psql`` (unaligned, tuples only); its output."""
        return self._run("psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(self.port),
                         "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql)

    def close(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
