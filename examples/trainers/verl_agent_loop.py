"""verl agent loop over an agentworld simulator (`agentworld serve`, OpenEnv HTTP).

verl (volcengine/verl b178a3c, 2026-01-29, verl/experimental/agent_loop/agent_loop.py): an AgentLoopBase
subclass registered with @register(name); async run(sampling_params, **kwargs) -> AgentLoopOutput(prompt_ids,
response_ids, response_mask, response_logprobs, reward_score, num_turns, metrics, extra_fields). kwargs are
the row's non-tensor columns: raw_prompt, extra_info, and uid, the id verl's trainer gives a prompt's
rollout.n samples (the GRPO group), used here as the group_key: the group's resets fork one root session.
Config (verl_agent_loop.yaml beside this file; this directory on PYTHONPATH, AGENTWORLD_URL the server):
    actor_rollout_ref.rollout.mode=async data.return_raw_chat=True \
    actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/trainers/verl_agent_loop.yaml
Dataset rows: {"agent_name": "agentworld", "prompt": [...], "data_source": "agentworld",
"extra_info": {"world_id": "python-terminal", "max_turns": 20}}. The reward is the episode's summed step
rewards (reward_score, so verl's reward loop is skipped). Observation turns are tokenized as verl's
ToolAgentLoop does (the chat template without the system prompt) and masked out (response_mask 0).
The messages this file sends are pinned in internal/server/testdata/trainers/verl.json.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentworld_env import Episode  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register  # noqa: E402


@register("agentworld")
class AgentWorldAgentLoop(AgentLoopBase):
    async def run(self, sampling_params, **kwargs):
        info = kwargs.get("extra_info") or {}
        ep = Episode(os.environ.get("AGENTWORLD_URL"), info["world_id"],
                     info.get("group_key") or kwargs.get("uid"), info.get("seed"))
        limit = self.config.actor_rollout_ref.rollout.response_length
        first = await asyncio.to_thread(ep.reset)
        prompt_ids = await self.apply_chat_template(list(kwargs["raw_prompt"]) + [{"role": "user", "content": first}])
        ids, mask, logprobs = [], [], []
        try:
            while ep.turns < int(info.get("max_turns", 20)) and len(ids) < limit:
                out = await self.server_manager.generate(request_id=ep.session, prompt_ids=prompt_ids + ids,
                                                         sampling_params=sampling_params)
                ids, mask = ids + out.token_ids, mask + [1] * len(out.token_ids)
                logprobs += out.log_probs or [0.0] * len(out.token_ids)
                text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                obs, _, done, _ = await asyncio.to_thread(ep.step, text)
                if done:
                    break
                obs_ids = await self.apply_chat_template([{"role": "user", "content": obs}], remove_system_prompt=True)
                ids, mask, logprobs = ids + obs_ids, mask + [0] * len(obs_ids), logprobs + [0.0] * len(obs_ids)
            state = await asyncio.to_thread(ep.state)
        finally:
            await asyncio.to_thread(ep.close)
        return AgentLoopOutput(
            prompt_ids=prompt_ids, response_ids=ids[:limit], response_mask=mask[:limit],
            response_logprobs=logprobs[:limit] if sampling_params.get("logprobs") else None,
            reward_score=ep.reward, num_turns=2 * ep.turns + 1, metrics={},
            extra_fields={"env_session_id": state["episode_id"], "env_status": state["status"]})
