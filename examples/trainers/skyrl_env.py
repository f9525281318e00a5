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
SkyRL hands the env (skyrl/train/generators/skyrl_gym_generator.py at a956457)
env_config = getattr(cfg.environment.skyrl_gym, env_class, {}) and extras = the row's other
fields plus "max_turns" (generator.max_turns). Its config validates environment.skyrl_gym
strictly (skyrl/train/config/config.py, SkyRLGymConfig has no agentworld field), so the server
URL comes from AGENTWORLD_URL (or the row's extra_info.base_url); with neither the env refuses
to start rather than guess. Config: environment.env_class=agentworld. An episode ends at the
smaller of the generator's max_turns and the row's extra_info.max_turns.
Rows that share group_key (every sample SkyRL draws for one prompt) are forks of one root
session, so the members of a GRPO group start from the same state.
The messages this file sends are pinned in internal/server/testdata/trainers/skyrl.json.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentworld_env import Episode  # noqa: E402

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError:  # lets the conformance test run without SkyRL installed
    BaseTextEnv, BaseTextEnvStepOutput = object, dict


class AgentWorldEnv(BaseTextEnv):
    def __init__(self, env_config, extras=None):
        super().__init__()
        extras = extras or {}
        info = extras.get("extra_info") or {}
        url = os.environ.get("AGENTWORLD_URL") or info.get("base_url") or (env_config or {}).get("base_url")
        if not url:
            raise ValueError("agentworld: set AGENTWORLD_URL to the agentworld serve URL "
                             "(SkyRL's config has no field for it; a row may give extra_info.base_url)")
        self.episode = Episode(url, info["world_id"], info.get("group_key"), info.get("seed"))
        limits = [int(x) for x in (extras.get("max_turns"), info.get("max_turns")) if x]
        self.max_turns = min(limits) if limits else 20

    def init(self, prompt):
        return prompt + [{"role": "user", "content": self.episode.reset()}], {}

    def step(self, action):
        obs, reward, done, metadata = self.episode.step(action)
        done = done or self.episode.turns >= self.max_turns
        return BaseTextEnvStepOutput(observations=[] if done else [{"role": "user", "content": obs}],
                                     reward=reward, done=done, metadata=metadata)

    def close(self):
        self.episode.close()
