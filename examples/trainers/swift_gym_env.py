"""ms-swift gym environment over an agentworld simulator (`agentworld serve`, OpenEnv HTTP).

ms-swift (modelscope/ms-swift 3602360, 2026-08-22, swift/rollout/gym_env.py and the GYMScheduler of
swift/rollout/multi_turn.py): an Env(env_config) with async reset(RolloutInferRequest) -> (observation,
info, system_message), async step(messages) -> (next_observation, reward, done, info) and async close(),
registered in the `envs` dict. GYMScheduler makes one Env per trajectory from the row's env_config column,
replaces the row's messages by [system, user(observation)], calls step with the whole conversation after
each reply and sums the step rewards into the gym reward column (total_reward).
Flags (this file is the plugin; AGENTWORLD_URL or env_config.base_url names the server):
    swift rlhf --rlhf_type grpo --use_gym_env true --gym_env agentworld \
        --multi_turn_scheduler gym_scheduler --max_turns 20 \
        --external_plugins examples/trainers/swift_gym_env.py ...
    (with --vllm_mode server, also --vllm_server_pass_dataset true so env_config reaches the rollout)
Dataset rows: {"messages": [{"role": "user", "content": "Fix the failing test."}],
"env_config": {"world_id": "python-terminal", "group_key": "task-17", "max_turns": 20}}. The num_generations samples of a
row share its group_key (without one, a hash of the row's messages), so they fork one root session.
The row's last user message leads the first observation; its system message, or env_config.system, is
the system prompt. GYMScheduler closes an env only when step says done (or when its uuid starts again): a
trajectory cut by --max_turns keeps its session open. Set env_config.max_turns to swift's --max_turns and
the env says done on that turn itself, so its session is closed. The messages this file sends are pinned in internal/server/testdata/trainers/swift.json.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentworld_env import Episode, group_key  # noqa: E402
from swift.rollout.gym_env import Env, envs  # noqa: E402


class AgentWorldEnv(Env):
    def __init__(self, env_config):
        super().__init__(env_config)
        self.episode = None

    async def reset(self, config):
        c, messages = self.env_config, list(config.messages or [])
        self.episode = Episode(c.get("base_url") or os.environ.get("AGENTWORLD_URL"), c["world_id"],
                               c.get("group_key") or group_key(messages), c.get("seed"))
        obs = await asyncio.to_thread(self.episode.reset)
        task = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        system = c.get("system") or next((m["content"] for m in messages if m["role"] == "system"), "")
        return (task + "\n\n" + obs if task else obs), {"env_session_id": self.episode.session}, system

    async def step(self, action):
        obs, reward, done, meta = await asyncio.to_thread(self.episode.step, action[-1]["content"])
        limit = self.env_config.get("max_turns")
        if limit and self.episode.turns >= int(limit):
            done = True  # ends (and so closes) the episode on the last turn swift will run
        return obs, reward, done, {"turn": self.episode.turns, "episode_reward": self.episode.reward}

    async def close(self):
        if self.episode:
            await asyncio.to_thread(self.episode.close)


envs["agentworld"] = AgentWorldEnv
