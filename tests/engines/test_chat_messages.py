"""The contract's chat-messages extension: old resume caches stay valid, messages reach chat backends."""

from __future__ import annotations

from evalita_eval.api import GenRequest, LLRequest, request_payload
from evalita_eval.running.cache import request_key
from evalita_eval.settings.fewshot import build_chat_messages, messages_as_text
from evalita_eval.sources.entries import select_entries


def test_requests_without_messages_keep_their_cache_key() -> None:
    plain = GenRequest("Domanda:", ("\n",), 5)
    assert request_payload(plain) == {"context": "Domanda:", "stop": ("\n",), "max_new_tokens": 5}
    # the key the runner computed before the field existed
    before = request_key("m", "generate_until", {"context": "Domanda:", "stop": ["\n"], "max_new_tokens": 5})
    assert request_key("m", "generate_until", request_payload(plain)) == before
    turns = ({"role": "user", "content": "Domanda:"},)
    chat = GenRequest("Domanda:", ("\n",), 5, messages=turns)
    assert request_payload(chat)["messages"] == turns
    assert request_key("m", "generate_until", request_payload(chat)) != before
    assert request_payload(LLRequest("a", " b")) == {"context": "a", "continuation": " b"}


def test_chat_messages_are_the_turns_the_template_renders() -> None:
    [entry] = select_entries(["ner_wn"])
    docs = [{"text": "Mario Rossi vive a Roma.", "entities": []}, {"text": "Anna va a Milano.", "entities": []}]
    pool = [{"text": f"Frase {i}.", "entities": []} for i in range(5)]
    messages = build_chat_messages(entry.compiled, "p1", docs, pool, 2, 1234)
    assert [[m["role"] for m in ms] for ms in messages] == [["user", "assistant", "user", "assistant", "user"]] * 2
    assert messages[0][-1]["content"] == entry.compiled.render("p1", docs[0])
    assert messages_as_text(messages[0][-1:]) == "<|user|>\n" + entry.compiled.render("p1", docs[0]) + "\n"
