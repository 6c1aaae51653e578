"""Judge prompts and generation settings as data (FLEUR's, verbatim from the official ``Yebin46/FLEUR`` scripts),
and the LLaVA conversation formats they are asked in (LLaVA's ``conv_templates["llava_v1"]``, FLEUR's, and
``conv_templates["llava_v0"]``, what EXPERT's released ``expert.py`` renders)."""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Optional, Sequence, Tuple

_CRITERIA = ("Grading Criteria:\n\n0.0: The caption does not describe the image at all.\n"
             "1.0: The caption accurately and clearly describes the image.\n\n")

# fleur.py / fleur_exp.py: the first user turn
FLEUR_PROMPT = ("Your task is to evaluate and rate the caption on a scale of 0.0 to 1.0 based on the given Grading "
                "Criteria. (Print Real Number Score ONLY)\n\n" + _CRITERIA
                + "Caption: {caption}\n\nScore(Choose a rating from 0.0 to 1.0):")
# reffleur.py: the references joined by newlines
REF_FLEUR_PROMPT = ("Your task is to evaluate and rate the candidate caption on a scale of 0.0 to 1.0 based on the "
                    "given Grading Criteria. (Print Real Number Score ONLY)\n\n" + _CRITERIA
                    + "Reference Captions: {references}\n\nCandidate Caption: {caption}\n\n"
                      "Score(Choose a rating from 0.0 to 1.0):")
# fleur_exp.py: the second user turn, after the smoothed score as the assistant's answer
EXPLANATION_PROMPT = "Why? Tell me the reason."

PROMPTS = {"fleur": FLEUR_PROMPT, "ref_fleur": REF_FLEUR_PROMPT}

# the official settings: greedy decoding, one beam, at most 512 new tokens (temperature 0.2 is passed there but
# greedy decoding does not use it)
GENERATION = {"do_sample": False, "num_beams": 1, "max_new_tokens": 512}

# LLaVA's conversations (llava/conversation.py): "llava_v1" (SeparatorStyle.TWO: a space after each user turn,
# "</s>" after each assistant turn) and "llava_v0" (SeparatorStyle.SINGLE: "###" after every turn)
_SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
           "detailed, and polite answers to the human's questions.")
LLAVA_V1 = {"system": _SYSTEM, "roles": ("USER", "ASSISTANT"), "separators": (" ", "</s>")}
LLAVA_V0 = {"system": _SYSTEM, "roles": ("Human", "Assistant"), "separators": ("###", "###")}
CONVERSATIONS = {"llava_v0": LLAVA_V0, "llava_v1": LLAVA_V1}
# what the official scripts write after the smoothed score when they put it in as the assistant's answer (then the
# conversation adds its own separator)
ANSWER_END = "</s>"
IMAGE_PLACEHOLDER = "<image>"

Turn = Tuple[str, Optional[str]]  # (role: "user" | "assistant", text; None: the turn the model writes)


def render_llava(turns: Sequence[Turn], conversation: Mapping = LLAVA_V1) -> str:
    """The prompt string of LLaVA's ``Conversation.get_prompt()`` for ``turns`` in ``conversation`` (one of
    :data:`CONVERSATIONS`; the image placeholder and a newline before the first user text, as the official
    scripts put it): the system text and the first separator, then ``role: text`` and the separator of that
    turn's position, and ``role:`` for the turn the model writes."""
    user, assistant = conversation["roles"]
    separators = conversation["separators"]
    text = conversation["system"] + separators[0]
    first_user = True
    for i, (role, message) in enumerate(turns):
        name = user if role == "user" else assistant
        if message is None:
            text += name + ":"
            continue
        if role == "user" and first_user:
            message, first_user = IMAGE_PLACEHOLDER + "\n" + message, False
        text += name + ": " + message + separators[i % 2]
    return text


def render_llava_v1(turns: Sequence[Turn]) -> str:
    """:func:`render_llava` in the ``llava_v1`` conversation."""
    return render_llava(turns, LLAVA_V1)


def chat_messages(turns: Sequence[Turn]) -> list:
    """``turns`` as the messages of a processor's chat template (the image in the first user turn); the turn the
    model writes is left to ``add_generation_prompt``."""
    messages, first_user = [], True
    for role, message in turns:
        if message is None:
            continue
        content = [{"type": "text", "text": message}]
        if role == "user" and first_user:
            content, first_user = [{"type": "image"}, *content], False
        messages.append({"role": role, "content": content})
    return messages


def fleur_caption(caption: str) -> str:
    """The caption as the official scripts read it: whitespace runs collapsed to single spaces."""
    return " ".join(caption.split())


def judge_prompt_sha256(template: str, explanation: Optional[str], prompt_format: str) -> str:
    """sha256 of everything that makes a judge's prompt: its first turn's template, the conversation format (and
    the explanation turn's template when asked, else None)."""
    material = {"template": template, "format": prompt_format, "conversation": CONVERSATIONS.get(prompt_format),
                "explanation": explanation}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def prompt_sha256(judge: str, *, explanation: bool = False, prompt_format: str = "llava_v1") -> str:
    """:func:`judge_prompt_sha256` of FLEUR's or RefFLEUR's prompt (``judge``: ``"fleur"`` or ``"ref_fleur"``)."""
    return judge_prompt_sha256(PROMPTS[judge], EXPLANATION_PROMPT if explanation else None, prompt_format)
