"""Rivals of the deciding words (bot.voice.rivals): which vocabulary words are worth scoring against the audio,
how the flags use the scores (bot.voice.doubt), and what the real model gives for a misheard command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.voice.doubt import Evidence, find_flags, substitute
from bot.voice.rivals import MAX_PER_NOTE, Rival, candidates, has_command, same_word, sound_of, unknown_nouns
from bot.voice.snap import DEV_VERBS
from bot.voice.transcribe import Transcriber
from tests.bot.conftest import VoiceNote


def sure(text: str) -> Evidence:
    return Evidence(tuple((w, 0.99) for w in text.split()))


def weighed(text: str, *rivals: Rival) -> Evidence:
    """Every word sure, and ``rivals`` scored."""
    return Evidence(sure(text).words, rivals=rivals)


def first_gap_from(table: dict[tuple[int, str], float]) -> object:
    """A FirstGap that knows the given (index, word) pairs and finds every other word unlikely."""

    def gap(index: int, word: str) -> float:
        return table.get((index, word.lower()), -20.0)

    return gap


def nouns(kind: str) -> Sequence[str]:
    return ("branch", "stash", "pull", "pytest") if kind != "verb" else DEV_VERBS


def test_spellings_of_one_word_are_not_rivals() -> None:
    assert same_word("tests", "test") and same_word("branch", "branches")
    assert same_word("handler.py", "handler") and same_word("Rollback", "roll back")
    assert not same_word("pull", "push") and not same_word("Hold", "pull")


def test_an_acronym_is_heard_as_its_letters_and_weighed_in_place_of_the_words_they_were_written_as() -> None:
    def never(index: int, word: str) -> float:
        return float("-inf")

    assert sound_of("CI") == "seeeye" and sound_of("branch") == "branch"
    # "CI" is said "see eye": tiny.en writes "the eye" or "see eye". The coding noun is weighed as written.
    for text, index in (("Merge the pull request once the eye is green.", 5), ("Skip the slow test and see eye.", 5)):
        [rival] = candidates(text, {}, nouns, never, alike=("ci", "branch"))
        assert (rival.index, rival.span, rival.word) == (index, 2, "CI")
    # One word in the letters' place is no rival ("once the CI is green" scored 11 nats below).
    assert not [r for r in candidates("Run it where I see it.", {}, nouns, never, alike=("ci",)) if r.span == 1]
    # A pair within the reach of a sound-alike is one flag, whose button puts the acronym in both words' place.
    text = "Merge the pull request once the eye is green."
    pair = Rival(5, 2, "CI", "Merge the pull request once CI is green.", gap=-4.1)
    [flag] = find_flags(text, weighed(text, pair))
    assert (flag.heard, flag.alternatives) == ("the eye", ("CI",))
    assert substitute(text, flag.index, "CI", flag.span) == "Merge the pull request once CI is green."
    assert find_flags(text, weighed(text, Rival(5, 2, "CI", pair.text, gap=-5.5))) == ()


def test_a_command_is_a_lexicon_verb_where_a_verb_goes() -> None:
    assert has_command("Run the tests.".split())
    assert has_command("Please stash my changes and push.".split())
    assert not has_command("And a retry with backoff around the upload call.".split())
    assert not has_command("Hold the latest changes.".split())  # "hold" is no development command
    # A later clause's command does not make up for the opening: "That's" may have been "fetch".
    assert not has_command("That's origin and rebase on top of it.".split())
    # Commands of two words whose first is no verb.
    assert has_command("Cherry pick the fix onto staging.".split()) and has_command("Roll back the deploy.".split())
    assert not has_command("Cherry trees are nice.".split())
    # The owner gives orders: "You run the failed job" is how "rerun…" was heard; "can you" keeps its command.
    assert not has_command("You run the failed job on main.".split())
    assert has_command("Can you rebase onto main?".split())
    # "Un-" heard as a word: "And stage" may be unstage, the opposite action; "And push" has no such twin.
    assert not has_command("And stage the readme changes.".split())
    assert not has_command("an install the linter".split())
    assert has_command("And push the branch.".split())


def test_any_word_that_sounds_like_the_owners_is_weighed_without_a_logits_pass() -> None:
    def never(index: int, word: str) -> float:
        return float("-inf")

    rivals = candidates("Drop the last dash.", {}, nouns, never, alike=("stash", "branch", "main"))
    assert [(r.index, r.word, r.text) for r in rivals] == [(3, "stash", "Drop the last stash.")]
    # A word that is one of the owner's own is taken as heard.
    assert candidates("Merge main now.", {}, nouns, never, alike=("main", "many")) == []


def test_two_words_that_sound_like_one_of_the_owners_are_weighed_as_one() -> None:
    def never(index: int, word: str) -> float:
        return float("-inf")

    rivals = candidates("Add a test for the back of timer.", {}, nouns, never, alike=("backoff", "branch"))
    assert "Add a test for the backoff timer." in {r.text for r in rivals}
    [pair] = [r for r in rivals if r.span == 2]
    assert (pair.index, pair.word) == (5, "backoff")
    # "rough" is heard for ruff: a last "gh" after "ou" sounds like F.
    assert [r.word for r in candidates("Lint it with rough.", {}, nouns, never, alike=("ruff",))] == ["ruff"]
    # A pair across a clause's end, or with one of the owner's words in it, is no rival.
    apart = candidates("Roll back. Off we go.", {}, nouns, never, alike=("backoff",))
    assert not [r for r in apart if r.span == 2 and not r.head]
    # Nor is a pair no nearer the word than one of its words alone: "last dash" is no nearer stash than "dash".
    assert [r.span for r in candidates("Drop the last dash.", {}, nouns, never, alike=("stash",))] == [1]


def test_an_opening_is_weighed_against_the_verb_it_sounds_like_however_unlikely_its_first_token() -> None:
    rivals = candidates("And do the last commit.", {}, nouns, first_gap_from({}))  # type: ignore[arg-type]
    assert "Undo the last commit." in {r.text for r in rivals if r.head and r.span == 2}
    # "We run" sounds like rerun; run itself is weighed only when its first token is likely.
    rivals = candidates("We run the pipeline.", {}, nouns, first_gap_from({(0, "run"): -1.0}))  # type: ignore[arg-type]
    assert {"Rerun the pipeline.", "Run the pipeline."} <= {r.text for r in rivals}
    rivals = candidates("You run the failed job.", {}, nouns, first_gap_from({}))  # type: ignore[arg-type]
    assert "Rerun the failed job." in {r.text for r in rivals if r.head and r.span == 2}
    rivals = candidates("And stage the readme changes.", {}, nouns, first_gap_from({}))  # type: ignore[arg-type]
    assert "Unstage the readme changes." in {r.text for r in rivals if r.head and r.span == 2}


def test_a_slot_gets_the_vocabulary_words_whose_first_token_was_nearly_as_likely() -> None:
    text = "Close the poll request."
    gap = first_gap_from({(2, "pull"): -1.5, (2, "pytest"): -2.9, (2, "stash"): -3.5, (2, "branch"): -9.0})
    rivals = candidates(text, {2: "noun"}, nouns, gap)  # type: ignore[arg-type]
    # The two likeliest within 3 nats, in their sentences; "stash" is too unlikely to spend a pass on.
    assert [(r.index, r.word, r.text) for r in rivals] == [
        (2, "pull", "Close the pull request."),
        (2, "pytest", "Close the pytest request."),
    ]


def test_a_word_the_vocabulary_lacks_where_a_noun_goes_is_weighed_like_a_deciding_one() -> None:
    owners = ("readme", "conflicts", "commits", "Eywa", "merge")
    # After an article or adjective, a preposition, or one of the owner's nouns; not the owner's own words,
    # not the command verbs, not across a clause's end.
    assert unknown_nouns("Resolve the conflicts in the reading.".split(), owners) == [5]
    assert unknown_nouns("Resolve the merge complex in Eywa.".split(), owners) == [3]
    assert unknown_nouns("Show me the log of the last five minutes.".split(), owners) == [8]  # "log" is a verb
    assert unknown_nouns("Run the tests, quickly.".split(), owners) == [2]
    assert unknown_nouns("Push it. Reading is fun.".split(), owners) == []
    # Two capitals are letters said one by one ("for IO", tiny.en's Eywa); two small letters are a word ("to").
    assert unknown_nouns("Summarize the commits for IO.".split(), owners) == [4]
    assert unknown_nouns("Send it to me in an hour.".split(), owners) == [6]

    def vocabulary(kind: str) -> Sequence[str]:
        return owners

    text = "Resolve the conflicts in the reading."
    gap = first_gap_from({(5, "readme"): -1.0, (5, "eywa"): -2.5, (5, "commits"): -2.8})
    rivals = candidates(text, {}, vocabulary, gap, unknown=[5])  # type: ignore[arg-type]
    assert [(r.index, r.word, r.text) for r in rivals] == [
        (5, "readme", "Resolve the conflicts in the readme."),
        (5, "Eywa", "Resolve the conflicts in the Eywa."),
    ]
    # Beyond the note's share of passes, and at most four of their own.
    table = {(i, w.lower()): -0.5 for i in range(20) for w in (*DEV_VERBS, *owners, "pull", "stash")}
    text = "Hold the poll request on the branch of the old pack for my last tester and the fiddle."
    slots = {2: "noun", 3: "noun", 6: "noun"}
    unknown = unknown_nouns(text.split(), owners)
    assert [i for i in unknown if i not in slots] == [10, 14, 17]  # two likeliest nouns each: six rivals
    rivals = candidates(text, slots, vocabulary, first_gap_from(table), unknown=unknown)  # type: ignore[arg-type]
    assert len(rivals) == MAX_PER_NOTE + 4
    assert all(r.index in (10, 14, 17) and r.unknown for r in rivals[MAX_PER_NOTE:])
    assert not any(r.unknown for r in rivals[:MAX_PER_NOTE])


def test_a_rival_of_a_word_the_vocabulary_lacks_may_score_five_nats_below() -> None:
    # With little priming (one project name) readme scored 4.5 nats below "the reading" on the real model.
    text = "Resolve the conflicts in the reading."
    near = Rival(5, 1, "readme", "Resolve the conflicts in the readme.", gap=-4.5, unknown=True)
    [flag] = find_flags(text, weighed(text, near), ["Eywa"])
    assert (flag.heard, flag.alternatives[0]) == ("reading", "readme")
    assert find_flags(text, weighed(text, Rival(5, 1, "readme", near.text, gap=-5.5, unknown=True)), ["Eywa"]) == ()
    # Any other rival keeps its 3 nats, in the same place or elsewhere.
    assert find_flags(text, weighed(text, Rival(5, 1, "readme", near.text, gap=-4.5)), ["Eywa"]) == ()
    text = "Hold the latest changes."
    assert find_flags(text, weighed(text, Rival(0, 1, "pull", "Pull the latest changes.", gap=-4.5))) == ()


def test_a_flagged_word_offers_the_owners_word_the_audio_liked_best_even_beyond_a_doubts_reach() -> None:
    # The real model: "for Eywa" heard "for IO" at 0.15; Eywa scored 6.4 nats below, too far to doubt the word.
    text = "Summarize the last handoff for IO."
    words = tuple((w, 0.15 if w == "IO." else 0.99) for w in text.split())
    far = Rival(5, 1, "Eywa", "Summarize the last handoff for Eywa.", gap=-6.4, unknown=True)
    beams = (("Summarize the last handoff for aisle.", -0.1),)
    [flag] = find_flags(text, Evidence(words, hypotheses=beams, rivals=(far,)), ["Eywa"])
    assert (flag.heard, flag.reason, flag.alternatives[:2]) == ("IO", "p=0.15", ("Eywa", "aisle"))
    # A sure word is not doubted for a far rival.
    assert find_flags(text, weighed(text, far), ["Eywa"]) == ()


def test_a_sentence_without_a_command_weighs_verbs_for_its_opening_words() -> None:
    text = "And then the last commit."
    gap = first_gap_from({(0, "amend"): -0.5, (0, "add"): -1.0, (0, "undo"): -2.0})
    rivals = candidates(text, {}, nouns, gap)  # type: ignore[arg-type]
    assert all(r.head for r in rivals) and len(rivals) == 6
    assert {r.text for r in rivals if r.word == "amend"} == {"Amend then the last commit.", "Amend the last commit."}
    # A comma after an opening name goes with it: "Tarsier, my changes" is "Stash my changes".
    named = candidates("Tarsier, my changes.", {}, nouns, first_gap_from({(0, "stash"): -1.0}))  # type: ignore[arg-type]
    assert named[0].text == "Stash my changes."


def test_a_note_never_spends_more_than_its_share_of_passes() -> None:
    text = "Hold the poll request on the branch."
    table = {(i, w): -0.5 for i in range(8) for w in (*DEV_VERBS, "pull", "stash", "pytest", "branch")}
    rivals = candidates(text, {2: "noun", 3: "noun", 6: "noun"}, nouns, first_gap_from(table))  # type: ignore[arg-type]
    assert len(rivals) == MAX_PER_NOTE
    assert len({r.text for r in rivals}) == len(rivals)


def test_a_rival_the_audio_supports_flags_the_word_and_comes_first() -> None:
    text = "Hold the latest changes into the release branch."
    near = Evidence(sure(text).words, rivals=(Rival(0, 1, "pull", "Pull the latest …", gap=-1.4),))
    [flag] = find_flags(text, near)
    assert (flag.index, flag.heard, flag.alternatives[0]) == (0, "Hold", "pull")
    assert "rival pull (-1.4)" in flag.reason
    far = Evidence(sure(text).words, rivals=(Rival(0, 1, "pull", "Pull the latest …", gap=-6.0),))
    assert find_flags(text, far) == ()


def test_a_verb_standing_for_two_opening_words_flags_both_and_replaces_both() -> None:
    text = "We run the failing job."
    evidence = weighed(
        text,
        Rival(0, 2, "rerun", "Rerun the failing job.", gap=-2.2, head=True),
        Rival(0, 1, "run", "Run run the failing job.", gap=-9.0, head=True),
    )
    [flag] = find_flags(text, evidence)
    assert (flag.index, flag.span, flag.heard, flag.alternatives) == (0, 2, "We run", ("rerun",))
    assert substitute(text, flag.index, flag.alternatives[0], flag.span) == "Rerun the failing job."


def test_a_verb_run_into_the_owners_word_it_acts_on_is_weighed_with_that_word_after_it() -> None:
    # The real model heard "diff staging against main" as "Deathstaging against main." and nothing else opened
    # it: each likely verb is weighed with staging kept, so a tap puts both words back.
    text = "Deathstaging against main."
    rivals = candidates(text, {}, nouns, first_gap_from({(0, "test"): -1.0}), ["staging", "main"])  # type: ignore[arg-type]
    glued = [r for r in rivals if " " in r.word]
    assert glued and all(r.head and r.span == 1 for r in glued)
    assert ("test staging", "Test staging against main.") in [(r.word, r.text) for r in glued]
    [flag] = find_flags(text, weighed(text, replace(glued[0], gap=-6.8)), ["staging", "main"])
    assert (flag.heard, flag.alternatives[0]) == ("Deathstaging", glued[0].word)
    assert substitute(text, flag.index, flag.alternatives[0], flag.span) == glued[0].text
    # The owner's word alone, or after a prefix of two letters ("Restaging"), is no glued verb.
    for plain in ("Staging is red.", "Restaging is red."):
        assert not [r for r in candidates(plain, {}, nouns, first_gap_from({}), ["staging"]) if " " in r.word]  # type: ignore[arg-type]


def test_an_opening_flag_offers_the_opening_words_own_rivals_within_the_head_gap() -> None:
    text = "Let the relay folder with ruff."
    load = Rival(0, 1, "load", "Load the relay folder with ruff.", gap=-6.5, head=True)
    lint = Rival(0, 1, "lint", "Lint the relay folder with ruff.", gap=-5.7)
    far = Rival(0, 1, "list", "List the relay folder with ruff.", gap=-12.0)
    [flag] = find_flags(text, weighed(text, load, lint, far))
    assert flag.alternatives == ("lint", "load")  # the audio's order; "list" is too far to offer


def test_two_words_one_of_the_owners_explains_are_flagged_and_replaced_together() -> None:
    text = "Add a test for the back of timer."
    words = tuple((w, 0.2 if w == "back" else 0.99) for w in text.split())
    pair = Rival(5, 2, "backoff", "Add a test for the backoff timer.", gap=-2.4)
    [flag] = find_flags(text, Evidence(words, rivals=(pair,)), ["backoff"])
    assert (flag.index, flag.span, flag.heard, flag.alternatives) == (5, 2, "back of", ("backoff",))
    assert "p=0.20" in flag.reason and "rival backoff (-2.4)" in flag.reason  # the flag on "back" merged in
    assert substitute(text, flag.index, flag.alternatives[0], flag.span) == "Add a test for the backoff timer."
    far = Rival(5, 2, "backoff", "Add a test for the backoff timer.", gap=-9.0)
    assert find_flags(text, Evidence(sure(text).words, rivals=(far,)), ["backoff"]) == ()


def test_a_rival_that_sounds_alike_may_score_further_below_and_one_with_the_same_sound_further_still() -> None:
    # "rough" and "ruff" are one sound: what tells them apart is the language model's taste for the common word.
    text = "Install rough in this project."
    [flag] = find_flags(text, weighed(text, Rival(1, 1, "ruff", "Install ruff in this project.", gap=-6.8)))
    assert (flag.heard, flag.alternatives[0]) == ("rough", "ruff")
    assert find_flags(text, weighed(text, Rival(1, 1, "ruff", "Install ruff in this project.", gap=-8.5))) == ()
    # "dip" only sounds like "diff": a shorter reach.
    text = "Review the last dip before I push."
    [flag] = find_flags(text, weighed(text, Rival(3, 1, "diff", "Review the last diff before I push.", gap=-4.3)))
    assert (flag.heard, flag.alternatives[0]) == ("dip", "diff")
    assert find_flags(text, weighed(text, Rival(3, 1, "diff", "Review the last diff…", gap=-5.5))) == ()
    # A rival that does not sound like the word keeps the ordinary reach of 3 nats.
    text = "Hold the latest changes."
    assert find_flags(text, weighed(text, Rival(0, 1, "pull", "Pull the latest changes.", gap=-4.3))) == ()
    # Two words with one word's sound ("back of" is backoff's) reach as far.
    text = "Debug the back of test that hangs."
    pair = Rival(2, 2, "backoff", "Debug the backoff test that hangs.", gap=-5.5)
    [flag] = find_flags(text, weighed(text, pair), ["backoff"])
    assert (flag.index, flag.span, flag.heard, flag.alternatives) == (2, 2, "back of", ("backoff",))


def test_a_head_flag_takes_the_place_of_a_flag_on_the_same_opening_word() -> None:
    text = "Blowing the Tarsier service to staging."
    words = tuple((w, 0.05 if w == "Blowing" else 0.99) for w in text.split())
    evidence = Evidence(words, rivals=(Rival(0, 1, "deploy", "Deploy the …", gap=-0.6, head=True),))
    [flag] = find_flags(text, evidence, ["Tarsier"])
    assert flag.index == 0 and flag.alternatives[0] == "deploy"
    assert "p=0.05" in flag.reason and "no command" in flag.reason


async def test_the_real_model_asks_about_a_command_it_heard_as_another_word(
    voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    # espeak-ng's "fetch origin" comes out of tiny.en as "That's origin": the sentence then has no command, and
    # "Fetch" explains the audio nearly as well, so the note waits with "fetch" offered first.
    note = voice_note("fetch origin and rebase on top of it")
    heard = await transcriber.transcribe(note.read_bytes(), hotwords=["backoff"], names=["backoff"])
    assert heard.evidence is None and heard.pending is not None  # not weighed yet: the echo goes first
    t = await transcriber.weigh(heard)
    assert t.evidence is not None and t.pending is None
    assert await transcriber.weigh(t) is t  # weighed once
    if t.text.split()[0].strip(",.").lower() == "fetch":  # heard right: nothing is weighed against it
        assert not [r for r in t.evidence.rivals if r.head] and not [f for f in t.flags if f.index == 0]
        return
    assert [r for r in t.evidence.rivals if r.head]
    assert t.flags and t.flags[0].index == 0 and t.flags[0].alternatives[0].lower() == "fetch"


async def test_answer_words_taken_back_from_snapping_are_no_rivals_either(
    voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    # While a prompt waits its answers' words are the owner's too; once the note is an instruction they are not
    # (Transcript.without), for snapping and for the rivals weighed after the echo alike.
    note = voice_note("deny the deploy to staging")
    heard = await transcriber.transcribe(note.read_bytes(), hotwords=["deny", "staging"], names=["deny", "staging"])
    instruction = heard.without(["deny"])
    assert instruction.dropped == frozenset({"deny"})
    t = await transcriber.weigh(instruction)
    assert t.evidence is not None and all(r.word.lower() != "deny" for r in t.evidence.rivals)
