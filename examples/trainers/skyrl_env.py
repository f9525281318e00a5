"""SkyRL environment over an agentworld simulator (`agentworld serve`, OpenEnv HTTP).

SkyRL-Gym's text-env interface (NovaSky-AI/SkyRL, skyrl-gym/skyrl_gym/envs/base_text_env.py):
BaseTextEnv(env_config, extras), init(prompt) -> (prompt, metadata), step(action: str) ->
BaseTextEnvStepOutput{observations, reward, done, metadata}, close().
Register it before training, e.g. in your entrypoint:
    from skyrl_gym.envs import register
    register(id="agentworld", entry_point="examples.trainers.skyrl_env:AgentWorldEnv")
Dataset rows: {"data_source": "agentworld", "prompt": [...], "env_class": "agentworld",
"reward_spec": {"method": "rule", "ground_truth": null},
"extra_info": {"world_id": "python-terminal", "group_key": "task-17", "max_turns": 20}}.
Config: environment.env_class=agentworld and environment.skyrl_gym.agentworld.base_url=URL.
Rows that share group_key (every sample SkyRL draws for one prompt) are forks of one root
session, so the members of a GRPO group start from the same state.
The messages this file sends are pinned in internal/server/testdata/trainers/skyrl.json.
"""
import json
import urllib.request

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError:  # lets the conformance test run without SkyRL installed
    BaseTextEnv, BaseTextEnvStepOutput = object, dict


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


class AgentWorldEnv(BaseTextEnv):
    def __init__(self, env_config, extras=None):
        super().__init__()
        info = (extras or {}).get("extra_info") or {}
        self.base = env_config.get("base_url", "http://127.0.0.1:8080")
        self.reset_body = {"world_id": info["world_id"]}
        if info.get("group_key"):
            self.reset_body["group_key"] = str(info["group_key"])
        if info.get("seed") is not None:
            self.reset_body["seed"] = int(info["seed"])
        self.max_turns = int(info.get("max_turns", env_config.get("max_turns", 20)))
        self.turns, self.session = 0, None

    def init(self, prompt):
        r = call(self.base, "POST", "/reset", self.reset_body)
        self.session = r["observation"]["session_id"]
        return prompt + [{"role": "user", "content": r["observation"]["text"]}], {}

    def step(self, action):
        self.turns += 1
        r = call(self.base, "POST", "/step", {"session_id": self.session, "action": {"action": action}})
        done = bool(r["done"]) or self.turns >= self.max_turns
        obs = [] if done else [{"role": "user", "content": r["observation"]["text"]}]
        return BaseTextEnvStepOutput(observations=obs, reward=float(r.get("reward") or 0.0),
                                     done=done, metadata=r.get("metadata") or {})

    def close(self):
        if self.session:
            call(self.base, "DELETE", "/v1/sessions/" + self.session)
            self.session = None
