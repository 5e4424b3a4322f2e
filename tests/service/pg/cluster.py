"""A private PostgreSQL server for the tests and benchmarks: a cluster made with initdb in a temporary folder,
started with pg_ctl on a free 127.0.0.1 port (its socket in that folder too), stopped and removed at the end.

As root (CI), initdb and pg_ctl run as the unprivileged ``postgres`` user, which owns the folder; otherwise
as the current user. PostgreSQL missing is an error that says how to install it, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

__all__ = ["Cluster", "pg_bin"]

USER = "macupos"  # the cluster's superuser (trust authentication, 127.0.0.1 only)


def pg_bin() -> Path:
    """The folder of initdb and pg_ctl: Debian's newest /usr/lib/postgresql/N/bin, else initdb on PATH."""
    versions = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise RuntimeError(
        "PostgreSQL is not installed (no initdb): `apt-get install postgresql` (scripts/setup --test installs it)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, folder: Path, port: int, bin_dir: Path, run_as: str | None) -> None:
        self.folder = folder
        self.port = port
        self.bin = bin_dir
        self.run_as = run_as
        self.data = folder / "data"

    @classmethod
    def create(cls) -> Cluster:
        bin_dir = pg_bin()
        folder = Path(tempfile.mkdtemp(prefix="macupos-pg-"))
        run_as = None
        if os.geteuid() == 0:  # initdb refuses root: the cluster is the postgres user's
            run_as = "postgres"
            entry = pwd.getpwnam(run_as)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        cluster = cls(folder, _free_port(), bin_dir, run_as)
        cluster._run("initdb", "-D", str(cluster.data), "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8")
        return cluster

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        cmd = [str(self.bin / tool), *args]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=self.folder)
        if done.returncode != 0:
            log = (self.folder / "log").read_text(errors="replace")[-2000:] if (self.folder / "log").exists() else ""
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{log}")

    def start(self) -> None:
        options = (
            f"-k {self.folder} -p {self.port} -h 127.0.0.1 -c fsync=off -c synchronous_commit=off"
            " -c full_page_writes=off -c max_connections=300"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(RuntimeError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, dbname: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def admin(self, statement: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=10) as conn:
            conn.execute(statement)  # type: ignore[arg-type]  # test-only DDL on names the tests chose
