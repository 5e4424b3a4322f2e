"""The Tcl sandbox process: runs one script at a time in a fresh safe child interpreter.

Started by ``memory.facts.tcl.Sandbox`` as ``python -I -S sandbox.py <memory MiB>``, standard library
only. Why a process and not the engine's thread: Tcl 8.6 aborts its whole process when a value
passes 2 GiB or an allocation fails (``set s $s$s`` in a loop), and one long C-level operation (a
huge bignum, a pathological regexp) cannot be interrupted by ``interp limit``. Here an address-space
rlimit turns such a blow-up into the death of this helper only; the host reports a clear error,
kills it on a hard deadline if needed, and starts a new one.

Protocol (JSON lines): the host sends ``{"script", "commands", "time_ms", "max_commands",
"max_bytes"}``; each of our commands called by the script becomes ``{"call": name, "args": [...]}``
answered by ``{"ok": text}`` or ``{"err": message}``; the run ends with ``{"done": 1, "code",
"result", "error", "line"}``.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import tkinter
from typing import Any

_MASTER = r"""
namespace eval ::facts {}
proc ::facts::call {name args} {
    set r [::facts_py $name {*}$args]
    if {[lindex $r 0] eq "ok"} { return [lindex $r 1] }
    return -code error -errorcode {FACTS} [lindex $r 1]
}
proc ::facts::repeat {c max s n} {
    if {![string is entier -strict $n]} { return -code error "expected integer but got \"$n\"" }
    if {[string length $s] * $n > $max} {
        return -code error "string repeat: the result would exceed the sandbox limit of $max characters"
    }
    interp invokehidden $c _facts_repeat $s $n
}
proc ::facts::lrepeat {c max n args} {
    if {![string is entier -strict $n]} { return -code error "expected integer but got \"$n\"" }
    if {$n * ([string length $args] + [llength $args]) > $max} {
        return -code error "lrepeat: the result would exceed the sandbox limit of $max characters"
    }
    interp invokehidden $c _facts_lrepeat $n {*}$args
}
set ::facts::allowed {
    append apply array break catch concat continue dict error eval expr for foreach format global if
    incr info join lappend lassign lindex linsert list llength lmap lrange lrepeat lreplace lreverse lsearch
    lset lsort proc regexp regsub return scan set split string subst switch tailcall throw try unset
    uplevel upvar variable while
}
set ::facts::allowed_ns {::tcl::string ::tcl::dict ::tcl::mathfunc ::tcl::mathop ::tcl::array ::tcl::info}
set ::facts::info_denied {hostname library loaded nameofexecutable script sharedlibextension patchlevel}

proc ::facts::make {commands max_bytes} {
    set c [interp create -safe]
    interp recursionlimit $c 200
    # Guards for the two commands that multiply their input: hidden originals behind size checks.
    interp eval $c {rename ::tcl::string::repeat ::_facts_repeat}
    interp hide $c _facts_repeat
    interp alias $c ::tcl::string::repeat {} ::facts::repeat $c $max_bytes
    interp hide $c lrepeat _facts_lrepeat
    interp alias $c lrepeat {} ::facts::lrepeat $c $max_bytes
    foreach sub $::facts::info_denied { interp eval $c [list catch [list rename ::tcl::info::$sub {}]] }
    # Delete every namespaced command outside the allowed ensembles (oo, zlib, clock, chan, file...).
    interp eval $c [list set ::__allowed_ns $::facts::allowed_ns]
    interp eval $c {
        foreach __ns {::oo ::zlib ::tcl::unsupported ::tcl::prefix ::tcl::clock ::tcl::chan ::tcl::file
                      ::tcl::encoding ::tcl::binary} {
            catch {namespace delete $__ns}
        }
        proc ::__walk {ns} {
            set out [info commands ${ns}::*]
            foreach child [namespace children $ns] { lappend out {*}[::__walk $child] }
            return $out
        }
        set __doomed {}
        foreach __cmd [::__walk ::tcl] {
            if {[string range $__cmd 0 [expr {[string last :: $__cmd] - 1}]] ni $::__allowed_ns} {
                lappend __doomed $__cmd
            }
        }
        foreach __cmd $__doomed { catch {rename $__cmd {}} }
        rename ::__walk {}
        unset -nocomplain __ns __cmd __doomed ::__allowed_ns
    }
    # Hide every global command not on the allow list (interp, rename, namespace, after, clock...).
    foreach cmd [interp eval $c {info commands}] {
        set name [string trimleft $cmd :]
        if {$name ni $::facts::allowed} { interp hide $c $cmd _facts_hidden_$name }
    }
    foreach name $commands { interp alias $c $name {} ::facts::call $name }
    return $c
}

proc ::facts::run {commands script time_ms max_commands max_bytes} {
    set c [::facts::make $commands $max_bytes]
    interp limit $c command -value [expr {[interp eval $c {info cmdcount}] + $max_commands}]
    set deadline [expr {[clock milliseconds] + $time_ms}]
    interp limit $c time -seconds [expr {$deadline / 1000}] -milliseconds [expr {$deadline % 1000}]
    set code [catch {interp eval $c [list catch $script ::__m ::__o]} res]
    if {$code} {
        catch {interp delete $c}
        if {[string match "*limit exceeded*" $res]} {
            set res "script stopped: $res (limits: [expr {$time_ms / 1000.0}] s, $max_commands commands)"
        }
        return [set ::facts::out [list 1 $res 0]]
    }
    set out [list 0 "" 0]
    catch {
        set m [interp eval $c {set ::__m}]
        # A top-level `return -code error` (or any code but ok) is a failed script: nothing commits.
        if {$res == 2} {
            set rc [interp eval $c {dict get $::__o -code}]
            if {$rc == 1} {
                set res 1
            } elseif {$rc != 0} {
                set res $rc
            }
        }
        if {$res == 1} {
            set line 0
            catch {set line [interp eval $c {dict get $::__o -errorline}]}
            set out [list 1 $m $line]
        } elseif {$res == 3 || $res == 4} {
            set out [list 1 "invoked \"[expr {$res == 3 ? "break" : "continue"}]\" outside of a loop" 0]
        } elseif {$res != 0 && $res != 2} {
            set out [list 1 "the script ended with return code $res: $m" 0]
        } else {
            set out [list 0 $m 0]
        }
    }
    catch {interp delete $c}
    return [set ::facts::out $out]
}
"""


def main(argv: list[str]) -> int:
    limit = int(argv[1]) * 1024 * 1024 if len(argv) > 1 else 1024 * 1024 * 1024
    for which, value in ((resource.RLIMIT_AS, limit), (resource.RLIMIT_CORE, 0)):
        # Not permitted here? The host's hard deadline still protects it.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def send(obj: dict[str, Any]) -> None:
        stdout.write(json.dumps(obj).encode("utf-8") + b"\n")
        stdout.flush()

    def call(name: str, *args: str) -> tuple[str, str]:
        send({"call": name, "args": list(args)})
        line = stdin.readline()
        if not line:
            raise SystemExit(0)
        reply = json.loads(line)
        if "ok" in reply:
            return ("ok", str(reply["ok"]))
        return ("err", str(reply.get("err", "error")))

    tcl = tkinter.Tcl()
    tcl.createcommand("::facts_py", call)
    tcl.eval(_MASTER)
    send({"ready": 1})
    for line in stdin:
        req = json.loads(line)
        try:
            tcl.call(
                "::facts::run",
                tuple(req["commands"]),
                req["script"],
                int(req["time_ms"]),
                int(req["max_commands"]),
                int(req["max_bytes"]),
            )
            # Read back through eval: it always gives text (call() would turn Tcl lists into tuples).
            code, text, err_line = (tcl.eval(f"lindex $::facts::out {i}") for i in range(3))
        except tkinter.TclError as exc:
            code, text, err_line = "1", f"sandbox error: {exc}", "0"
        result = text if code == "0" else ""
        error = text if code != "0" else ""
        send({"done": 1, "code": int(code), "result": result, "error": error, "line": int(err_line)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
