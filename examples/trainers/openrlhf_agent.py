"""OpenRLHF agent function over an agentworld simulator (`agentworld serve`, OpenEnv HTTP).

OpenRLHF (OpenRLHF/OpenRLHF 3c3be62, 2026-08-13, openrlhf/utils/agent.py and
openrlhf/trainer/ray/vllm_engine.py _load_agent_executor): the file --train.agent_func_path names defines
AgentExecutor, a MultiTurnAgentExecutor over an AgentInstanceBase whose async reset({observation: prompt,
label}) returns {observation} and whose async step({observation_text, action_text, label,
sampling_params}) returns {rewards, scores, environment_feedback, done, sampling_params, extra_logs};
the executor sums `rewards` (tensors: it calls .item()), keeps the last `scores` and appends the feedback
text to the token stream, so the feedback carries the chat template's turn markers (FEEDBACK below,
ChatML by default; set AGENTWORLD_FEEDBACK for another template). The end marker (END) opens the
feedback only when the action text lacks it, as OpenRLHF's own examples do, so it is never doubled.
The executor may stop on its token budget before the episode is done and never step again:
AgentExecutor closes every episode its execute() opened when execute() returns, however it ends.
Flags: --train.agent_func_path examples/trainers/openrlhf_agent.py --data.input_key prompt
    --data.label_key label --data.apply_chat_template --rollout.n_samples_per_prompt 8
Dataset rows: {"prompt": "Fix the failing test.\n\n{observation}", "label": "{\"world_id\":
\"python-terminal\", \"group_key\": \"task-17\"}"}: the world's first observation replaces {observation};
the samples of a prompt share its group_key (without one, a hash of the prompt) and fork one root
session. AGENTWORLD_URL names the server.
The messages this file sends are pinned in internal/server/testdata/trainers/openrlhf.json.
"""
import asyncio
import contextvars
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentworld_env import Episode, group_key  # noqa: E402
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor  # noqa: E402

try:
    from torch import tensor
except ImportError:  # lets the conformance test run without torch: a float with .item()
    class tensor(float):
        def item(self):
            return float(self)

END = os.environ.get("AGENTWORLD_END_MARKER", "<|im_end|>")
FEEDBACK = os.environ.get("AGENTWORLD_FEEDBACK", "\n<|im_start|>user\n{observation}<|im_end|>\n<|im_start|>assistant\n")

# The instances made inside one execute() call (one asyncio task each), so it can close them.
_opened = contextvars.ContextVar("agentworld_opened", default=None)


def feedback(action_text, observation):
    """The text appended after the action: the end marker unless the action already ends with it."""
    lead = "" if action_text.rstrip().endswith(END) else END
    return lead + FEEDBACK.format(observation=observation)


class AgentInstance(AgentInstanceBase):
    def __init__(self, *args, **kwargs):
        self.episode = None
        opened = _opened.get()
        if opened is not None:
            opened.append(self)

    async def reset(self, states, **kwargs):
        label, prompt = states["label"], states["observation"]
        spec = json.loads(label) if isinstance(label, str) else dict(label)
        if "{observation}" not in prompt:
            raise ValueError("agentworld: the prompt must hold {observation}, where the world's first observation goes")
        self.episode = Episode(os.environ.get("AGENTWORLD_URL"), spec["world_id"],
                               spec.get("group_key") or group_key(prompt), spec.get("seed"))
        first = await asyncio.to_thread(self.episode.reset)
        return {"observation": prompt.replace("{observation}", first)}

    async def step(self, states, **kwargs):
        action = states["action_text"].rstrip()
        if action.endswith(END):  # the chat template's marker is not part of the world's action
            action = action[:-len(END)]
        obs, reward, done, meta = await asyncio.to_thread(self.episode.step, action)
        if done:
            await asyncio.to_thread(self.episode.close)
        return {"rewards": tensor(reward), "scores": tensor(self.episode.reward),
                "environment_feedback": "" if done else feedback(states["action_text"], obs), "done": done,
                "sampling_params": states.get("sampling_params"), "extra_logs": {"env_turns": tensor(self.episode.turns)}}


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self):
        super().__init__(AgentInstance)

    async def execute(self, *args, **kwargs):
        opened = []
        token = _opened.set(opened)
        try:
            return await super().execute(*args, **kwargs)
        finally:
            _opened.reset(token)
            for inst in opened:  # a no-op for an episode that ended by itself
                if inst.episode is not None:
                    await asyncio.to_thread(inst.episode.close)
