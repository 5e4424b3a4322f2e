"""Moonshine's side of bench/voice_second_engine.py: transcribe 16 kHz float32 clips, one JSON line each.

Runs under a separate virtualenv with only ``numpy`` and ``moonshine-cpp`` (0.1.4: base-en ships in the
wheel), never under the project's: it imports nothing from the project. Reads a jobs file of JSON lines
``{"id": ..., "path": "clip.npy"}`` (mono float32 at 16 kHz, as bot.voice.audio.decode_samples gives)
and writes ``{"id": ..., "text": ..., "decode_s": ...}`` to stdout as each clip is done.

Run (by the bench): /tmp/moonvenv/bin/python bench/_moonshine_worker.py JOBS.jsonl
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any

import moonshine_cpp
import numpy as np
from moonshine_cpp.moonshine_cpp import moonshine_lib


def transcribe(model: Any, samples: np.ndarray) -> str:
    # MoonshineModel.transcribe(array) in 0.1.4 builds a ctypes.c_float_p, which ctypes does not have, so it
    # always raises; the library's own C entry point takes the samples as a float pointer.
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    text = ctypes.c_char_p(0)
    pointer = samples.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    error = moonshine_lib.moonshine_transcribe(model.model_handle, pointer, samples.shape[0], ctypes.byref(text))
    if error != 0:
        raise RuntimeError(f"moonshine_transcribe failed with error {error}")
    out = (text.value or b"").decode("utf-8")
    moonshine_lib.moonshine_free_text(text)
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    model = moonshine_cpp.MoonshineModel()  # English: base-en from the wheel, no download
    transcribe(model, np.zeros(16_000, dtype=np.float32))  # the first call loads the sessions: not a clip's cost
    with open(sys.argv[1], encoding="utf-8") as jobs:
        for line in jobs:
            job = json.loads(line)
            samples = np.load(job["path"])
            start = time.perf_counter()
            text = transcribe(model, samples)
            seconds = time.perf_counter() - start
            print(json.dumps({"id": job["id"], "text": text, "decode_s": round(seconds, 4)}), flush=True)


if __name__ == "__main__":
    main()
