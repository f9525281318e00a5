"""TRL GRPOTrainer reward function backed by `agentworld reward serve`.

    from trl import GRPOConfig, GRPOTrainer
    from trl_reward import agentworld_reward
    trainer = GRPOTrainer(model=..., reward_funcs=[agentworld_reward], args=GRPOConfig(...),
                          train_dataset=load_dataset("parquet", data_files="rl.parquet")["train"])

TRL (huggingface/trl f2cd577, 2026-07-24, trl/trainer/grpo_trainer.py _calculate_rewards)
calls reward_func(prompts=, completions=, completion_ids=, **columns, trainer_state=,
log_extra=, log_metric=), every dataset column passed as a list; a None reward becomes NaN
(ignored). The columns here are those of `agentworld data export --mode rl`.
"""
from agentworld_reward import item, prompt_of, score_items


def agentworld_reward(prompts, completions, data_source, reward_model, extra_info, log_metric=None, **kwargs):
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    results = score_items([item(ds, text, rm["ground_truth"], prompt_of(p, ei), (ei or {}).get("id", ""))
                           for p, text, ds, rm, ei in zip(prompts, texts, data_source, reward_model, extra_info)])
    if log_metric is not None:
        log_metric("agentworld/rule", sum(r["components"]["rule"] for r in results) / len(results))
    return [r["score"] for r in results]  # None for a dropped item: TRL ignores NaN rewards
