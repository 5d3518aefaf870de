"""Detokenisation of KIND tokens: exact examples and the span round trip."""

from itertools import accumulate

from hypothesis import given
from hypothesis import strategies as st

from evalita_data.converters.detok import APOSTROPHES, CLOSING, OPENING, PLAIN, _kind, detokenize, separators


def text_of(tokens: str) -> str:
    return detokenize(tokens.split(" "))[0]


def test_elision_joins_the_next_word_but_truncation_does_not():
    assert text_of("L' accordo dell' 8 settembre e un po' di quest' anno") == (
        "L'accordo dell'8 settembre e un po' di quest'anno"
    )
    assert text_of("l’ hanno fatto") == "l’hanno fatto"


def test_elision_before_punctuation_keeps_its_space():
    assert text_of("l' « Associazione »") == "l' «Associazione»"


def test_closing_and_opening_punctuation():
    assert text_of("Sì , disse ( ridendo ) : 20 % ... ok ! [ … ]") == "Sì, disse (ridendo): 20%... ok! […]"


def test_straight_quotes_alternate_open_close():
    assert text_of('il " congelamento " e l\' " antidoto "') == 'il "congelamento" e l\' "antidoto"'
    assert text_of("Al ' Benito Stirpe ' di") == "Al 'Benito Stirpe' di"


def test_unknown_apostrophe_words_keep_their_space():
    assert text_of("problema di produzione' , quanto") == "problema di produzione', quanto"
    assert text_of("McDonald 's compie") == "McDonald's compie"
    assert text_of("Ca' Granda") == "Ca' Granda"


def test_first_token_never_has_a_space():
    assert detokenize([",", "a"]) == (", a", [(0, 1), (2, 3)])
    assert detokenize([]) == ("", [])


_token = st.text(
    alphabet=st.sampled_from(list("aàbL'’\"«»“”()[],.;:!?%…°-/sé1")),
    min_size=1,
    max_size=6,
)


@given(st.lists(_token, max_size=30))
def test_spans_slice_back_to_the_tokens(tokens):
    text, spans = detokenize(tokens)
    assert len(spans) == len(tokens)
    assert [text[s:e] for s, e in spans] == tokens
    previous_end = 0
    for start, end in spans:
        assert text[previous_end:start] in ("", " ") if previous_end else start == 0
        previous_end = end
    assert previous_end == len(text)


@given(st.lists(st.lists(_token, min_size=1, max_size=12), max_size=6))
def test_sentences_end_to_end_get_the_separators_of_each_alone(sentences):
    """One call over a whole file (NER) equals one call per sentence: quotes restart, nothing glues across."""
    tokens = [t for s in sentences for t in s]
    starts = list(accumulate((len(s) for s in sentences), initial=0))[:-1]
    assert separators(tokens, starts) == [sep for s in sentences for sep in separators(s)]


def test_words_and_numbers_are_plain():
    # separators() skips str.isalnum tokens without asking _kind: no rule may involve a letter or digit.
    assert not any(ch.isalnum() for ch in CLOSING | OPENING | set(APOSTROPHES) | {'"'})
    assert all(_kind(t) is PLAIN for t in ["l", "dell", "s", "2010", "àè", "Roma"])
