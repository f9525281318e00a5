// Package trainset writes expanded samples as the files trainers read:
// chat JSONL, the exact layouts of ms-swift and LLaMA-Factory (per-turn
// loss weights), TRL, verl RL rows as Parquet, sample JSON, and sharded
// continued-pretraining corpora with their manifest; each export records
// the template versions it pinned in a metadata file beside it.
package trainset

import (
	"context"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Format is an output layout of Export.
type Format int

const (
	// FormatSamples writes Sample JSON lines (`agentworld data expand`).
	FormatSamples Format = iota
	// FormatChat writes SFT JSON lines in the chat "messages" layout that
	// ms-swift and LLaMA-Factory read; see ChatLine.
	FormatChat
	// FormatVerl writes RL prompts as Parquet in verl's layout; see RLRow.
	FormatVerl
	// FormatSwift writes one SwiftLine per trajectory (TrainerSwift).
	FormatSwift
	// FormatLlamaFactory writes one LFLine per trajectory
	// (TrainerLlamaFactory).
	FormatLlamaFactory
	// FormatChatSampled writes ChatLines, each turn as many times as
	// sampledCopies draws for its weight (TrainerLlamaFactoryV0).
	FormatChatSampled
	// FormatTRL writes TRLLines sampled the same way (TrainerTRL).
	FormatTRL
	// FormatRLJSONL writes the RL rows of FormatVerl as JSON lines, for
	// trainers that read RL prompts from JSONL (OpenRLHF, slime).
	FormatRLJSONL
	// FormatRLSwift writes them as JSON lines with the prompt under
	// "messages": ms-swift reads a "prompt" column as one string query
	// (swift/dataset/preprocessor/core.py), its conversations as messages.
	FormatRLSwift
)

// IsRL reports whether f writes RL rows.
func (f Format) IsRL() bool { return f == FormatVerl || f == FormatRLJSONL || f == FormatRLSwift }

// SwiftRLRow is an RLRow as ms-swift's GRPO dataset reads it: the prompt
// as messages; the other columns reach its reward functions as keyword
// arguments.
type SwiftRLRow struct {
	DataSource  string           `json:"data_source"`
	Messages    []expand.Message `json:"messages"`
	Ability     string           `json:"ability"`
	RewardModel RewardModel      `json:"reward_model"`
	ExtraInfo   ExtraInfo        `json:"extra_info"`
}

// ChatMessage is a message of a ChatLine. Loss is set on assistant
// messages only: false on history observations (context, not targets) and
// true on the target unless its loss weight is 0. ms-swift honours the
// per-message "loss" key; LLaMA-Factory ignores it (train it with
// mask_history: true, which has the same effect).
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Loss    *bool  `json:"loss,omitempty"`
}

// ChatLine is one SFT sample. LossWeight is the masking weight of the
// target turn, for trainers that scale the loss per sample; the other
// fields let a user trace and filter samples.
type ChatLine struct {
	Messages   []ChatMessage `json:"messages"`
	LossWeight float64       `json:"loss_weight"`
	Category   string        `json:"category"`
	ID         string        `json:"id"`
	Domain     string        `json:"domain"`
	Turn       int           `json:"turn"`
	Template   string        `json:"template,omitempty"`
	TemplateID string        `json:"template_id,omitempty"`
}

// ChatLineOf builds the SFT line of a sample.
func ChatLineOf(s *expand.Sample) ChatLine {
	no, yes := false, s.Weight > 0
	msgs := make([]ChatMessage, 0, 2*len(s.History)+3)
	for _, m := range s.Prompt() {
		cm := ChatMessage{Role: m.Role, Content: m.Content}
		if m.Role == "assistant" {
			cm.Loss = &no
		}
		msgs = append(msgs, cm)
	}
	msgs = append(msgs, ChatMessage{Role: "assistant", Content: s.Target(), Loss: &yes})
	return ChatLine{Messages: msgs, LossWeight: s.Weight, Category: s.Category, ID: s.ID, Domain: s.Domain, Turn: s.Turn, Template: s.Template, TemplateID: s.TemplateID}
}

// RLRow is one RL prompt in the layout verl's RLHF dataset reads: the chat
// prompt, a data_source naming the reward function ("agentworld/<domain>",
// which `agentworld reward serve` reads as the domain), and reward_model
// with the real observation as ground truth.
type RLRow struct {
	DataSource  string           `parquet:"data_source" json:"data_source"`
	Prompt      []expand.Message `parquet:"prompt,list" json:"prompt"`
	Ability     string           `parquet:"ability" json:"ability"`
	RewardModel RewardModel      `parquet:"reward_model" json:"reward_model"`
	ExtraInfo   ExtraInfo        `parquet:"extra_info" json:"extra_info"`
}

// RewardModel says how a rollout is scored and against what.
type RewardModel struct {
	// Style is "model" by default: the hybrid reward is mostly an LLM judge.
	Style       string `parquet:"style" json:"style"`
	GroundTruth string `parquet:"ground_truth" json:"ground_truth"`
}

// ExtraInfo carries what the reward function and analyses need besides the
// ground truth.
type ExtraInfo struct {
	Index        int64   `parquet:"index" json:"index"`
	Split        string  `parquet:"split" json:"split"`
	ID           string  `parquet:"id" json:"id"`
	TrajectoryID string  `parquet:"trajectory_id" json:"trajectory_id"`
	Domain       string  `parquet:"domain" json:"domain"`
	Turn         int64   `parquet:"turn" json:"turn"`
	TotalTurns   int64   `parquet:"total_turns" json:"total_turns"`
	Category     string  `parquet:"category" json:"category"`
	LossWeight   float64 `parquet:"loss_weight" json:"loss_weight"`
	Template     string  `parquet:"template" json:"template"`
	TemplateID   string  `parquet:"template_id" json:"template_id"`
	OL           float64 `parquet:"ol" json:"ol"`
	Nov          float64 `parquet:"nov" json:"nov"`
	Jac          float64 `parquet:"jac" json:"jac"`
	R            float64 `parquet:"r" json:"r"`
	// Action is the turn's action prompt ("### Turn N\n**Action:**\n…"),
	// which the reward's judge shows as the current turn.
	Action string `parquet:"action" json:"action"`
	// Messages is the prompt without its system message: the earlier
	// turns and the current action, from which `agentworld reward` builds
	// the judge conversation with the same history as `bench judge`. verl
	// hands a reward function extra_info but not the prompt; the judge
	// does not read the (long) system prompt, so it is not repeated here.
	Messages []expand.Message `parquet:"messages,list" json:"messages"`
}

// RLRowOf builds the verl row of a sample; the index is set by the writer.
func RLRowOf(s *expand.Sample, split, style string) RLRow {
	row := RLRow{
		DataSource:  "agentworld/" + s.Domain,
		Prompt:      s.Prompt(),
		Ability:     "world_model",
		RewardModel: RewardModel{Style: style, GroundTruth: s.Observation},
		ExtraInfo: ExtraInfo{
			Split: split, ID: s.ID, TrajectoryID: s.TrajectoryID, Domain: s.Domain,
			Turn: int64(s.Turn), TotalTurns: int64(s.TotalTurns), Category: s.Category,
			LossWeight: s.Weight, Template: s.Template, TemplateID: s.TemplateID,
			OL: s.Stats.OL, Nov: s.Stats.Nov, Jac: s.Stats.Jac, R: s.Stats.R,
			Action: conversation.ActionPrompt(s.Turn, s.Action),
		},
	}
	for _, m := range row.Prompt {
		if m.Role != "system" {
			row.ExtraInfo.Messages = append(row.ExtraInfo.Messages, m)
		}
	}
	return row
}

// ExportOptions configure Export; nil means FormatSamples with dedup on.
type ExportOptions struct {
	// Format is the output layout; the zero value is FormatSamples.
	Format Format
	// KeepDuplicates turns off exact dedup. Dedup keeps 16 bytes per
	// distinct sample (plus map overhead), the one part of a run whose
	// memory grows with the output; false (the zero value) dedups.
	KeepDuplicates bool
	// Split is extra_info.split of Parquet rows; "" means "train".
	Split string
	// RewardStyle is reward_model.style of Parquet rows; "" means "model".
	RewardStyle string
	// RowGroup is the number of Parquet rows buffered before a row group
	// is flushed; 0 means 2048. A row group is also flushed once its text
	// reaches RowGroupBytes, so long prompts do not pile up in memory.
	RowGroup int
	// RowGroupBytes bounds the text buffered in one row group; 0 means 64 MiB.
	RowGroupBytes int
	// Sampled reads the input as `agentworld data sample`'s selected set
	// (its sft.jsonl, ReadSampledLine) instead of trajectories: each line
	// is one sample whose target is the kept teacher beam, reasoning
	// included, and is written once in the chosen format (a per-trajectory
	// format writes it as a conversation whose history weighs 0). Only
	// xo's Seed is used (the sampled formats' draws); FormatVerl is
	// refused, RL rows being prompts with the recorded observation. False
	// (the zero value) reads trajectories.
	Sampled bool
}

type outItem struct {
	hash [16]byte
	line []byte
	row  *RLRow
	// copies is how many times line is written; 0 means once. Sampled
	// formats set it (an item drawn zero times is not produced at all), and
	// dedup applies before it, so a repeated turn is not a duplicate.
	copies int
	// pin is the template version the item's system prompt came from
	// (TemplatePin); "" for a trajectory's own prompt.
	pin string
}

// Export streams trajectories from files through expansion (and masking)
// and writes the samples to out in the chosen format, in input order,
// dropping exact duplicates by content hash.
func Export(ctx context.Context, files []string, out io.Writer, xo *expand.ExpandOptions, eo *ExportOptions, opts *datapipe.Options) (*datapipe.Summary, error) {
	var e ExportOptions
	if eo != nil {
		e = *eo
	}
	if e.Split == "" {
		e.Split = "train"
	}
	if e.RewardStyle == "" {
		e.RewardStyle = "model"
	}
	if e.RowGroup <= 0 {
		e.RowGroup = 2048
	}
	if e.RowGroupBytes <= 0 {
		e.RowGroupBytes = 64 << 20
	}
	if e.Sampled && e.Format.IsRL() {
		return nil, fmt.Errorf("the sampled set holds SFT targets; RL prompts come from trajectories (export them in mode rl)")
	}
	if e.Format.perTrajectory() && xo != nil && xo.Mode != expand.SFT && !e.Sampled {
		return nil, fmt.Errorf("a per-trajectory SFT layout needs every turn: expand with mode sft, not rl")
	}
	o := opts.Norm()
	exps := make([]*expand.Expander, o.Workers)
	for i := range exps {
		x, err := expand.NewExpander(xo)
		if err != nil {
			return nil, err
		}
		exps[i] = x
	}
	var pw *parquet.GenericWriter[RLRow]
	if e.Format == FormatVerl {
		pw = parquet.NewGenericWriter[RLRow](out, parquet.Compression(&parquet.Zstd))
	}
	seen := map[[16]byte]struct{}{}
	sum := &datapipe.Summary{}
	pending, pendingBytes := 0, 0
	var seed uint64
	if xo != nil {
		seed = xo.Seed
	}
	err := datapipe.Run(ctx, files, o, sum, func(w int, batch []datapipe.InLine) ([]outItem, []*datapipe.RecordError, int64, error) {
		var items []outItem
		// perTurn adds a sample in a per-turn format; draw is its seeded
		// uniform draw for the sampled formats.
		perTurn := func(s *expand.Sample, draw func() float64) error {
			it := outItem{hash: s.ContentHash(), pin: TemplatePin(s.Template, s.TemplateID)}
			if e.Format.sampled() {
				if it.copies = sampledCopies(s.Weight, draw()); it.copies == 0 {
					return nil
				}
			}
			var err error
			switch e.Format {
			case FormatVerl, FormatRLJSONL, FormatRLSwift:
				row := RLRowOf(s, e.Split, e.RewardStyle)
				it.row = &row
			case FormatChat, FormatChatSampled:
				it.line, err = trajectory.Marshal(ChatLineOf(s))
			case FormatTRL:
				it.line, err = trajectory.Marshal(TRLLineOf(s))
			default:
				it.line, err = trajectory.Marshal(s)
			}
			items = append(items, it)
			return err
		}
		if e.Sampled {
			errs, ok, err := expand.EachSampled(batch, func(l *datapipe.InLine, s *expand.Sample) error {
				var err error
				switch e.Format {
				case FormatSwift, FormatLlamaFactory:
					it := outItem{hash: s.ContentHash(), pin: TemplatePin(s.Template, s.TemplateID)}
					if e.Format == FormatLlamaFactory {
						it.line, err = trajectory.Marshal(SampledLFLineOf(s))
					} else {
						it.line, err = trajectory.Marshal(SampledSwiftLineOf(s))
					}
					items = append(items, it)
				default:
					err = perTurn(s, func() float64 { return sampledRNG(seed, s).Float64() })
				}
				if err != nil {
					return fmt.Errorf("%s:%d: %w", l.File, l.N, err)
				}
				return nil
			})
			return items, errs, ok, err
		}
		errs, ok, err := datapipe.EachTrajectory(batch, func(l *datapipe.InLine, t *trajectory.Trajectory) error {
			var traj []*expand.Sample
			err := exps[w].Expand(t, func(s *expand.Sample) error {
				if e.Format.perTrajectory() {
					traj = append(traj, s)
					return nil
				}
				return perTurn(s, func() float64 { return exps[w].Rng(t, "sft-sample", s.Turn).Float64() })
			})
			if err == nil && len(traj) > 0 {
				it := outItem{hash: trajectoryHash(traj), pin: TemplatePin(traj[0].Template, traj[0].TemplateID)}
				if e.Format == FormatLlamaFactory {
					it.line, err = trajectory.Marshal(LFLineOf(traj))
				} else {
					it.line, err = trajectory.Marshal(SwiftLineOf(traj))
				}
				items = append(items, it)
			}
			if err != nil {
				return fmt.Errorf("%s:%d: %w", l.File, l.N, err)
			}
			return nil
		})
		return items, errs, ok, err
	}, func(items []outItem) error {
		for _, it := range items {
			if !e.KeepDuplicates {
				if _, dup := seen[it.hash]; dup {
					sum.Duplicates++
					continue
				}
				seen[it.hash] = struct{}{}
			}
			if it.row != nil && pw == nil {
				it.row.ExtraInfo.Index = sum.Written
				var v any = it.row
				if e.Format == FormatRLSwift {
					r := it.row
					v = SwiftRLRow{DataSource: r.DataSource, Messages: r.Prompt, Ability: r.Ability, RewardModel: r.RewardModel, ExtraInfo: r.ExtraInfo}
				}
				line, err := trajectory.Marshal(v)
				if err != nil {
					return err
				}
				if _, err := out.Write(append(line, '\n')); err != nil {
					return err
				}
				sum.Written++
				sum.Pinned(it.pin, 1)
				continue
			}
			if it.row != nil {
				it.row.ExtraInfo.Index = sum.Written
				if _, err := pw.Write([]RLRow{*it.row}); err != nil {
					return err
				}
				pending++
				pendingBytes += len(it.row.RewardModel.GroundTruth)
				for _, m := range it.row.Prompt {
					pendingBytes += len(m.Content)
				}
				if pending >= e.RowGroup || pendingBytes >= e.RowGroupBytes {
					if err := pw.Flush(); err != nil {
						return err
					}
					pending, pendingBytes = 0, 0
				}
				sum.Written++
				sum.Pinned(it.pin, 1)
				continue
			}
			it.line = append(it.line, '\n')
			for range max(it.copies, 1) {
				if _, err := out.Write(it.line); err != nil {
					return err
				}
				sum.Written++
			}
			sum.Pinned(it.pin, max(it.copies, 1))
		}
		return nil
	})
	if pw != nil {
		if cerr := pw.Close(); err == nil {
			err = cerr
		}
	}
	return sum, err
}
