"""ms-swift ORM plugin backed by `agentworld reward serve`.

    swift rlhf --rlhf_type grpo --external_plugins examples/trainers/swift_orm.py \
        --reward_funcs agentworld --dataset rl.jsonl ...

ms-swift (modelscope/ms-swift 3602360, 2026-08-22,
docs/source_en/Instruction/GRPO/DeveloperGuide/reward_function.md): ORM subclasses are
registered in swift.rewards.orms and called with completions plus every other dataset
column as keyword arguments. The columns here are those of `agentworld data export
--mode rl` (data_source, reward_model, extra_info).
"""
from swift.rewards import ORM, orms

from agentworld_reward import item, prompt_of, score_items


class AgentWorldReward(ORM):
    def __call__(self, completions, data_source, reward_model, extra_info=None, **kwargs):
        extra_info = extra_info or [{}] * len(completions)
        results = score_items([item(ds, c, rm["ground_truth"], prompt_of(None, ei), (ei or {}).get("id", ""))
                               for c, ds, rm, ei in zip(completions, data_source, reward_model, extra_info)])
        return [r["score"] if r["score"] is not None else 0.0 for r in results]


orms["agentworld"] = AgentWorldReward
