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


def item(data_source, response, ground_truth, action="", id=""):
    """One reward item; action is the turn's action prompt (the judge's current turn)."""
    return {"id": str(id), "data_source": data_source, "prompt": action or "",
            "response": response, "ground_truth": ground_truth}
