"""Drives examples/trainers/skyrl_env.py as SkyRL's generator drives a BaseTextEnv (NovaSky-AI/SkyRL
a956457, skyrl-gym/skyrl_gym/envs/base_text_env.py): per sample an env built from (env_config, extras),
init(prompt), step(action) after each generation until done, close(); two samples of one prompt (one
group_key). The skyrl_gym module here is a stand-in with upstream's signatures; the policy is scripted.
Usage: skyrl_driver.py EXAMPLES_DIR SERVER_URL; prints each sample's prompt and steps as JSON."""
import json
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


for name in ("skyrl_gym", "skyrl_gym.envs", "skyrl_gym.envs.base_text_env"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["skyrl_gym.envs.base_text_env"].__dict__.update(BaseTextEnv=BaseTextEnv, BaseTextEnvStepOutput=BaseTextEnvStepOutput)
sys.path.insert(0, sys.argv[1])
from skyrl_env import AgentWorldEnv  # noqa: E402

assert issubclass(AgentWorldEnv, BaseTextEnv)
out = []
for _ in range(2):
    env = AgentWorldEnv({"base_url": sys.argv[2]}, {"extra_info": {"world_id": "shell", "group_key": "task-1", "max_turns": 5}})
    prompt, meta = env.init([{"role": "user", "content": "Fix the failing test."}])
    steps = []
    for action in ['[{"keystrokes": "ls\\n", "duration": 0.1}]', "[]"]:
        steps.append(env.step(action))
        if steps[-1]["done"]:
            break
    env.close()
    out.append({"prompt": prompt, "steps": [{k: s[k] for k in ("observations", "reward", "done")} for s in steps]})
print(json.dumps(out))
