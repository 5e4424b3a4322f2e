"""How well a waiting prompt's spoken answers are heard: by the transcript's words, and by scoring the answers.

While an approval, a confirmation or a review waits, a voice note may answer it (bot.voice.answers). Each answer
(allow, deny, allow for this session, yes, no, run it, cancel, keep, forget) is said with a few carriers
("allow", "allow it", "yes, allow"), each spoken at run time by the Piper ``en_US-joe-medium`` voice (the
``speech`` extra) and by espeak-ng at 150 and 210 words a minute, encoded like a Telegram voice note
(bench/voice_wer.py makes the clips). Non-answers ("hello", "what time is it", coding instructions) are said
to every prompt kind. Each note is transcribed as bot.voice.flow does it (the answers' words and the owner's
names primed, snapping on), then read two ways:

  * words: the transcript alone (bot.voice.intent.interpret, the old path);
  * scored: the prompt's answers scored against the audio (bot.voice.prompt_scoring.decide), the bot's path.

Reported per voice and overall: answers right, taken as ANOTHER answer (target 0), asked again (ambiguous),
missed (taken as no answer: it would run as an instruction); non-answers rejected, asked about, or taken as
an answer (target 0). ``--margins`` and ``--separations`` evaluate other thresholds on the same scores.

Run: .venv/bin/python -m bench.voice_answers [--voices piper,espeak150,espeak210] [--prompt none,answers]
       [--margins 4,6,8] [--separations 1,2,3] [--cache DIR] [--json OUT] [--errors]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.voice_wer import HOTWORDS, Sentence, make_clips
from bot.voice.intent import Choice, PromptKind, answer_hotwords, interpret
from bot.voice.prompt_scoring import MARGIN, SEPARATION, Scored, decide, score_answer
from bot.voice.transcribe import Transcriber, Transcript

# (prompt kind, the choice it stands for, what is said). "yes"/"no" are said to every kind.
_YES = ("yes", "yes please", "yeah")
_NO = ("no", "no thanks", "nope")
ANSWERS: list[tuple[PromptKind, Choice, str]] = [
    *(("approval", "allow", s) for s in ("allow", "allow it", "yes, allow")),
    *(("approval", "deny", s) for s in ("deny", "deny it", "no, deny")),
    *(("approval", "allow_session", s) for s in ("allow for this session", "allow it for this session")),
    ("approval", "allow_session", "yes, for this session"),
    *(("approval", "allow", s) for s in _YES),
    *(("approval", "deny", s) for s in _NO),
    *(("confirmation", "run", s) for s in ("run it", "run", "yes, run it")),
    *(("confirmation", "cancel", s) for s in ("cancel", "cancel it", "no, cancel")),
    *(("confirmation", "run", s) for s in _YES),
    *(("confirmation", "cancel", s) for s in _NO),
    *(("review", "keep", s) for s in ("keep", "keep it", "yes, keep it")),
    *(("review", "forget", s) for s in ("forget", "forget it", "no, forget it")),
    *(("review", "keep", s) for s in _YES),
    *(("review", "forget", s) for s in _NO),
]
NON_ANSWERS = [
    "hello",
    "hello there",
    "what time is it",
    "thanks",
    "good morning",
    "how are you",
    "run the tests in eywa",
    "fix the flaky test in the relay",
    "show me the diff",
    "deploy to staging",
]
KINDS: tuple[PromptKind, ...] = ("approval", "confirmation", "review")


@dataclass(frozen=True, slots=True)
class Heard:
    kind: PromptKind
    said: str
    expected: Choice | None  # None: not an answer
    transcript: Transcript
    scored: Scored | None
    seconds: float  # scoring only


def _outcome(expected: Choice | None, outcome: str, choice: Choice | None) -> str:
    if expected is None:
        return "taken" if outcome == "answer" else ("asked" if outcome == "ambiguous" else "rejected")
    if outcome == "answer":
        return "right" if choice == expected else "other"
    return "asked" if outcome == "ambiguous" else "missed"


async def hear(
    t: Transcriber, clip: bytes, kind: PromptKind, said: str, expected: Choice | None, primed: bool
) -> Heard:
    words = [*answer_hotwords(kind), *HOTWORDS]  # as bot.voice.flow primes a note while a prompt waits
    transcript = await t.transcribe(clip, hotwords=words, names=words)
    start = time.perf_counter()
    scored = await score_answer(t, clip, kind, transcript, primed=primed)
    return Heard(kind, said, expected, transcript, scored, time.perf_counter() - start)


def tally(heard: list[Heard], margin: float, separation: float) -> dict[str, Any]:
    words: Counter[str] = Counter()
    scored: Counter[str] = Counter()
    for h in heard:
        read = interpret(h.transcript.text, h.kind)
        words[_outcome(h.expected, read.outcome, read.choice)] += 1
        got = decide(h.kind, h.transcript.text, h.scored, margin=margin, separation=separation)
        scored[_outcome(h.expected, got.outcome, got.choice)] += 1
    return {"n": len(heard), "words": dict(words), "scored": dict(scored)}


def _errors(heard: list[Heard], margin: float, separation: float) -> list[str]:
    out = []
    for h in heard:
        got = decide(h.kind, h.transcript.text, h.scored, margin=margin, separation=separation)
        verdict = _outcome(h.expected, got.outcome, got.choice)
        if verdict not in ("right", "rejected"):
            s = h.scored
            detail = (
                f"best {s.phrase!r} {s.score:.1f}, other {s.runner_up:.1f}, transcript {s.heard:.1f}"
                if s
                else "unscored"
            )
            out.append(f"{verdict:8} {h.kind:12} said {h.said!r} → heard {h.transcript.heard!r}: {detail}")
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    voices = args.voices.split(",")
    said = sorted({s for _, _, s in ANSWERS} | set(NON_ANSWERS))
    clips = await make_clips([Sentence(s, (), s) for s in said], voices, args.cache)
    by_text = {v: dict(zip(said, clips[v], strict=True)) for v in voices}
    margins = [float(m) for m in args.margins.split(",")]
    separations = [float(s) for s in args.separations.split(",")]
    results: dict[str, Any] = {"answers": len(ANSWERS) * len(voices), "runs": []}
    async with Transcriber(cpu_threads=args.threads) as t:
        await t.load()
        for prompt_name in args.prompt.split(","):
            primed = prompt_name == "answers"
            answers: dict[str, list[Heard]] = {}
            others: dict[str, list[Heard]] = {}
            for voice in voices:
                answers[voice] = [
                    await hear(t, by_text[voice][s], kind, s, choice, primed) for kind, choice, s in ANSWERS
                ]
                others[voice] = [
                    await hear(t, by_text[voice][s], kind, s, None, primed)
                    for kind, s in itertools.product(KINDS, NON_ANSWERS)
                ]
            timing = [h.seconds for v in voices for h in answers[v] + others[v] if h.scored is not None]
            for margin, separation in itertools.product(margins, separations):
                row: dict[str, Any] = {"prompt": prompt_name, "margin": margin, "separation": separation}
                every_a = [h for v in voices for h in answers[v]]
                every_n = [h for v in voices for h in others[v]]
                row["answers"] = {v: tally(answers[v], margin, separation) for v in voices}
                row["answers"]["all"] = tally(every_a, margin, separation)
                row["non_answers"] = {v: tally(others[v], margin, separation) for v in voices}
                row["non_answers"]["all"] = tally(every_n, margin, separation)
                row["scoring_p50_s"] = round(statistics.median(timing), 3) if timing else None
                if args.errors:
                    row["errors"] = _errors(every_a + every_n, margin, separation)
                results["runs"].append(row)
                print(_line(row), file=sys.stderr, flush=True)
    return results


def _line(row: dict[str, Any]) -> str:
    a, n = row["answers"]["all"], row["non_answers"]["all"]
    lines = [
        f"prompt={row['prompt']} margin={row['margin']} separation={row['separation']} "
        f"(scoring p50 {row['scoring_p50_s']} s)",
        f"  answers {a['n']}: words {a['words']} | scored {a['scored']}",
        f"  non-answers {n['n']}: words {n['words']} | scored {n['scored']}",
    ]
    lines += [f"    {e}" for e in row.get("errors", [])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--voices", default="piper,espeak150,espeak210")
    parser.add_argument("--prompt", default="answers", help="the scoring context: none, answers (their glossary)")
    parser.add_argument("--margins", default=str(MARGIN), help="nats below the transcript an answer may score")
    parser.add_argument("--separations", default=str(SEPARATION), help="nats the best answer must beat the rest by")
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 threads (2: this machine's cores)")
    parser.add_argument("--cache", type=Path, help="keep the generated clips here and reuse them (not committed)")
    parser.add_argument("--errors", action="store_true", help="list every note not right (or not rejected)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not shutil.which("espeak-ng") and any(v.startswith("espeak") for v in args.voices.split(",")):
        sys.exit("espeak-ng is needed for the espeak voices")
    results = asyncio.run(run(args))
    out = json.dumps(results, indent=2, ensure_ascii=False)
    print(out if args.json is None else f"figures written to {args.json}")
    if args.json:
        args.json.write_text(out + "\n")


if __name__ == "__main__":
    main()
