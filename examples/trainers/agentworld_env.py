"""One episode on `agentworld serve`'s OpenEnv HTTP surface: the client the trainer adapters here share.

POST /reset {world_id, group_key?, seed?} -> {observation: {text, session_id, ...}, reward, done, metadata};
POST /step {session_id, action: {action: TEXT}} -> the same shape; GET /state?session_id= -> {episode_id,
step_count, status, ...}; DELETE /v1/sessions/ID closes the session. Resets that carry one group_key are
forks of one cached root session, so the members of a GRPO group start from the same state.
"""
import hashlib
import json
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8080"


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def group_key(value):
    """A group key for trainers that give the G samples of a prompt no shared id: a hash of the prompt."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:24]


class Episode:
    def __init__(self, base_url, world_id, group_key=None, seed=None):
        self.base = base_url or DEFAULT_URL
        self.reset_body = {"world_id": world_id}
        if group_key:
            self.reset_body["group_key"] = str(group_key)
        if seed is not None:
            self.reset_body["seed"] = int(seed)
        self.session, self.reward, self.turns, self.done = None, 0.0, 0, False

    def reset(self):
        """Starts the session; returns the world's first observation."""
        r = call(self.base, "POST", "/reset", self.reset_body)
        self.session = r["observation"]["session_id"]
        return r["observation"]["text"]

    def step(self, action):
        """Sends one action (the domain's text, e.g. a JSON tool call); returns (observation, reward, done, metadata)."""
        r = call(self.base, "POST", "/step", {"session_id": self.session, "action": {"action": action}})
        reward = float(r.get("reward") or 0.0)
        self.reward, self.turns, self.done = self.reward + reward, self.turns + 1, bool(r["done"])
        return r["observation"]["text"], reward, self.done, r.get("metadata") or {}

    def state(self):
        return call(self.base, "GET", "/state?" + urllib.parse.urlencode({"session_id": self.session}))

    def close(self):
        if self.session:
            call(self.base, "DELETE", "/v1/sessions/" + self.session)
            self.session = None
