"""Drives examples/trainers/skyrl_env.py as SkyRL's generator drives a BaseTextEnv (NovaSky-AI/SkyRL
a956457, skyrl-gym/skyrl_gym/envs/base_text_env.py): per sample an env built from (env_config, extras),
init(prompt), step(action) after each generation until done, close(); two samples of one prompt (one
group_key). The skyrl_gym module here is a stand-in with upstream's signatures; the policy is scripted.
Usage: skyrl_driver.py EXAMPLES_DIR SERVER_URL; prints each sample's prompt and steps as JSON."""
import json
import os
import sys
import types
from typing import Any, Dict, List, TypedDict


class BaseTextEnvStepOutput(TypedDict):
    observations: List[Dict[str, str]]
    reward: float
    done: bool
    metadata: Dict[str, Any]


class BaseTextEnv:
    def __init__(self):
        self.turns, self.max_turns, self.tool_groups = 0, 1, []

    def step(self, action: str) -> BaseTextEnvStepOutput:
        raise NotImplementedError

    def init(self, prompt):
        return prompt, {}

    def close(self):
        pass


UPSTREAM = os.environ.get("AGENTWORLD_UPSTREAM")  # SkyRL's skyrl-gym folder, to run its real code
if UPSTREAM:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import upstream  # noqa: E402

    upstream.install(UPSTREAM)
    import skyrl_gym  # noqa: E402
    from skyrl_gym.envs import register  # noqa: E402
    from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402
else:
    for name in ("skyrl_gym", "skyrl_gym.envs", "skyrl_gym.envs.base_text_env"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["skyrl_gym.envs.base_text_env"].__dict__.update(BaseTextEnv=BaseTextEnv, BaseTextEnvStepOutput=BaseTextEnvStepOutput)
sys.path.insert(0, sys.argv[1])
from skyrl_env import AgentWorldEnv  # noqa: E402

if UPSTREAM:
    register(id="agentworld", entry_point="skyrl_env:AgentWorldEnv")

    def make(env_config, extras):
        return skyrl_gym.make("agentworld", env_config=env_config, extras=extras)
else:
    make = AgentWorldEnv

assert issubclass(AgentWorldEnv, BaseTextEnv)
out = []
# As SkyRL's generator builds the env: env_config is getattr(cfg.environment.skyrl_gym,
# "agentworld", {}) (no such field upstream: {}), extras the row's other fields plus the
# generator's max_turns; the URL comes from the environment.
os.environ["AGENTWORLD_URL"] = sys.argv[2]
for _ in range(2):
    row = {"data_source": "agentworld", "reward_spec": {"method": "rule", "ground_truth": None},
           "extra_info": {"world_id": "shell", "group_key": "task-1", "max_turns": 5}}
    env = make({}, dict(row, max_turns=8))
    assert env.max_turns == 5
    prompt, meta = env.init([{"role": "user", "content": "Fix the failing test."}])
    steps = []
    for action in ['[{"keystrokes": "ls\\n", "duration": 0.1}]', "[]"]:
        steps.append(env.step(action))
        if steps[-1]["done"]:
            break
    env.close()
    out.append({"prompt": prompt, "steps": [{k: s[k] for k in ("observations", "reward", "done")} for s in steps]})
print(json.dumps(out))
