"""Host side of the Tcl sandbox: the helper process, its limits, and the script result.

The engine thread writes a script to the helper (``sandbox.py``) and answers each of our commands
the script calls, synchronously, until the helper reports the end. A helper that dies (its memory
rlimit, a Tcl panic) or overruns the hard deadline is killed and replaced; the script gets a clear
error and the host lives on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.errors import MemoryStoreError

__all__ = ["Sandbox", "SandboxCrash", "ScriptLimits", "ScriptResult"]

logger = logging.getLogger(__name__)

Handler = Callable[[str, list[str]], tuple[bool, str]]
_HELPER = Path(__file__).with_name("sandbox.py")


@dataclass(frozen=True, slots=True)
class ScriptLimits:
    time_s: float = 5.0  # wall time inside the interpreter (`interp limit time`)
    max_commands: int = 1_000_000  # Tcl commands executed (`interp limit command`)
    max_bytes: int = 16_000_000  # largest `string repeat` / `lrepeat` result
    memory_mb: int = 1024  # address-space limit of the helper process
    max_script_chars: int = 200_000
    max_output_chars: int = 200_000  # longer results and responses are truncated with a marker
    grace_s: float = 3.0  # hard deadline past time_s before the helper is killed


@dataclass(frozen=True, slots=True)
class ScriptResult:
    response: str | None  # what `respond` set, if anything
    result: str  # the value of the script's last command
    error: str | None  # the error message when the script failed
    line: int  # the script line of the error (0 when unknown)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        """What an agent or a user sees: the response, else the result, else the error with its line."""
        if self.error is not None:
            return f"error: {self.error}" + (f" (line {self.line})" if self.line else "")
        return self.response if self.response is not None else self.result


class SandboxCrash(MemoryStoreError):
    """The helper died or overran its deadline; it has been killed and will be restarted.

    Never leaves memory.facts.api, which turns it into the script's error."""


class Sandbox:
    """One helper process, started lazily, driven synchronously from a single thread."""

    def __init__(self, limits: ScriptLimits) -> None:
        self.limits = limits
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self.restarts = 0

    def _start(self) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-I", "-S", str(_HELPER), str(self.limits.memory_mb)]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._proc, self._buf = proc, b""
        ready = self._read(time.monotonic() + 30)
        if ready is None or "ready" not in ready:
            self.close()
            raise SandboxCrash("the Tcl sandbox did not start (is tkinter available?)")
        return proc

    def _read(self, deadline: float) -> dict[str, Any] | None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def _send(self, obj: dict[str, Any]) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.write(json.dumps(obj).encode("utf-8") + b"\n")
        proc.stdin.flush()

    def run(self, script: str, commands: Sequence[str], handler: Handler) -> tuple[bool, str, int]:
        """Run ``script``; returns (ok, result or error message, error line). Raises SandboxCrash."""
        lim = self.limits
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                self.restarts += 1
            self._start()
        deadline = time.monotonic() + lim.time_s + lim.grace_s
        request = {
            "script": script,
            "commands": list(commands),
            "time_ms": int(lim.time_s * 1000),
            "max_commands": lim.max_commands,
            "max_bytes": lim.max_bytes,
        }
        finished = False
        try:
            self._send(request)
            while True:
                msg = self._read(deadline)
                if msg is None:
                    timed_out = time.monotonic() >= deadline
                    raise SandboxCrash(
                        f"script stopped: no answer within {lim.time_s + lim.grace_s:.1f} s"
                        if timed_out
                        else f"script stopped: it exceeded the sandbox memory limit ({lim.memory_mb} MiB) or crashed it"
                    )
                if "done" in msg:
                    finished = True
                    if int(msg["code"]) == 0:
                        return True, str(msg["result"]), 0
                    return False, str(msg["error"]), int(msg["line"])
                ok, text = handler(str(msg["call"]), [str(a) for a in msg["args"]])
                self._send({"ok": text} if ok else {"err": text})
        except (BrokenPipeError, ConnectionResetError, ValueError) as exc:
            raise SandboxCrash(
                f"script stopped: it exceeded the sandbox memory limit ({lim.memory_mb} MiB) or crashed it ({exc})"
            ) from None
        finally:
            if not finished:
                self.close()  # mid-conversation: the helper's state is unknown, start afresh next time

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
