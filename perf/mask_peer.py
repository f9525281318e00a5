#!/usr/bin/env python3
"""CPython peer of `agentworld data mask`: the same statistics, written the
straightforward way (json.loads, a regular expression, Python sets), stdlib
only. It reads unified trajectories JSONL and writes one line per turn in the
same format, so the two outputs can be compared line by line.

    python3 perf/mask_peer.py CONFIG.json < corpus.jsonl > peer.jsonl

CONFIG.json is the masking config as JSON (`agentworld data mask
--print-config json`). Words are maximal runs of Unicode letters (L*),
decimal digits (Nd) and '_', lower-cased one character at a time, after
removing the record format markers (a leading "### Turn N\n**Action:**" of
the action, a leading "**Environment Observation:**" of the observation).
The action's words are the agent's own: an action that is a JSON object or
array counts the words of its values (strings and number literals, never
keys, true, false or null), an object holding a "keystrokes" key only that
key's value; any other action, or JSON that does not parse, all its text.
"""
import json
import re
import sys
import unicodedata


def word_class():
    ranges, start = [], None
    for cp in range(sys.maxunicode + 2):
        ok = cp <= sys.maxunicode and (
            cp == 0x5F or unicodedata.category(chr(cp))[0] == "L" or unicodedata.category(chr(cp)) == "Nd")
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            ranges.append((start, cp - 1))
            start = None
    esc = lambda c: "\\U%08x" % c
    return "[" + "".join(esc(a) if a == b else esc(a) + "-" + esc(b) for a, b in ranges) + "]+"


WORD = re.compile(word_class())
# str.lower() applies full case mapping; the definition is the simple
# per-character mapping, which differs only for U+0130 and final sigma.
SIMPLE_LOWER = {0x130: "i", 0x3A3: "\u03c3"}


def lower(text):
    if "\u0130" in text or "\u03a3" in text:
        return text.translate(SIMPLE_LOWER).lower()
    return text.lower()


ACTION_HEADING = re.compile(r"### Turn [0-9]+\n\*\*Action:\*\*")
OBSERVATION_MARKER = "**Environment Observation:**"


def strip_markers(action, observation):
    m = ACTION_HEADING.match(action)
    if m:
        action = action[m.end():]
    if observation.startswith(OBSERVATION_MARKER):
        observation = observation[len(OBSERVATION_MARKER):]
    return action, observation


class Pairs(list):
    """A JSON object as its (key, value) pairs, duplicates kept."""


class Number(str):
    """A JSON number as its literal."""


def reject_constant(name):
    raise ValueError("not JSON: " + name)


def value_texts(v, out):
    if isinstance(v, Pairs):
        keys = [k for k, _ in v]
        for k, x in v:
            if "keystrokes" not in keys or k == "keystrokes":
                value_texts(x, out)
    elif isinstance(v, list):
        for x in v:
            value_texts(x, out)
    elif isinstance(v, str):  # strings and Number literals
        out.append(v)


def action_words(action):
    if action.lstrip(" \t\n\r")[:1] in ("{", "["):
        try:
            v = json.loads(action, object_pairs_hook=Pairs, parse_float=Number, parse_int=Number,
                           parse_constant=reject_constant)
        except (ValueError, RecursionError):
            v = None
        if v is not None:
            texts = []
            value_texts(v, texts)
            return [w for t in texts for w in WORD.findall(lower(t))]
    return WORD.findall(lower(action))


def stats(action, observation):
    action, observation = strip_markers(action, observation)
    act = action_words(action)
    obs = WORD.findall(lower(observation))
    wa, wo = set(act), set(obs)
    shared = len(wa & wo)
    ol = shared / len(wa) if wa else 0.0
    nov = (len(wo) - shared) / len(wo) if wo else 0.0
    union = len(wa | wo)
    jac = shared / union if union else 0.0
    r = len(obs) / max(len(act), 1)
    return ol, nov, jac, r, len(act), len(obs)


def holds(bound, x):
    if bound is None:
        return True
    lo, hi = bound.get("min"), bound.get("max")
    return (lo is None or x >= lo) and (hi is None or x <= hi)


def classify(categories, values):
    for cat in categories:
        when = cat.get("when") or {}
        if all(holds(when.get(k), v) for k, v in values.items()):
            return cat
    return categories[-1]


def main():
    with open(sys.argv[1]) as f:
        categories = json.load(f)["categories"]
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        t = json.loads(line)
        for k, turn in enumerate(t["turns"], 1):
            ol, nov, jac, r, na, no = stats(turn["action"], turn["observation"])
            cat = classify(categories, {"ol": ol, "nov": nov, "jac": jac, "r": r, "act_words": na, "obs_words": no})
            out.write(json.dumps({
                "id": t.get("id", ""), "domain": t["domain"], "turn": k, "category": cat["name"],
                "weight": float(cat["weight"]), "ol": ol, "nov": nov, "jac": jac, "r": r,
                "act_words": na, "obs_words": no}, ensure_ascii=False, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
