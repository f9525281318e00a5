"""A small client of `agentworld reward serve`, shared by the trainer shims here.

Standard library only. Set AGENTWORLD_REWARD_URL (default http://127.0.0.1:8090)
and, when the server requires one, AGENTWORLD_API_KEY.
"""
import json
import os
import urllib.request

URL = os.environ.get("AGENTWORLD_REWARD_URL", "http://127.0.0.1:8090").rstrip("/")
KEY = os.environ.get("AGENTWORLD_API_KEY", "")


def score_items(items, timeout=600):
    """POSTs items to /v1/rewards:batch and returns one result per item, in order.

    An item is {"id", "data_source", "prompt", "response", "ground_truth", "extra_info"}.
    A result has "score" (None when the judge-failure policy dropped the item),
    "components" {"rubric", "rule", ...}, "judge" and "reason".
    """
    body = json.dumps({"items": items}).encode()
    req = urllib.request.Request(URL + "/v1/rewards:batch", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    if KEY:
        req.add_header("Authorization", "Bearer " + KEY)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)["results"]


def messages(prompt):
    """A prompt column as plain {role, content} messages (Parquet readers hand lists as arrays)."""
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]


def prompt_of(prompt=None, extra_info=None):
    """What the judge needs of a row: its prompt messages (the history and the current action),
    else extra_info["messages"] as `agentworld data export --mode rl` writes them (for trainers
    that hand a reward function extra_info but not the prompt), else extra_info["action"]."""
    if prompt is not None and not isinstance(prompt, str) and len(prompt) > 0:
        return messages(prompt)
    info = extra_info or {}
    if info.get("messages") is not None and len(info["messages"]) > 0:
        return messages(info["messages"])
    return prompt if isinstance(prompt, str) and prompt else info.get("action", "")


def item(data_source, response, ground_truth, prompt="", id=""):
    """One reward item. prompt is the row's prompt as chat messages, so the judge sees the
    history as `agentworld bench judge` does, or the action prompt as text (see prompt_of)."""
    return {"id": str(id), "data_source": data_source, "prompt": prompt or "",
            "response": response, "ground_truth": ground_truth}
