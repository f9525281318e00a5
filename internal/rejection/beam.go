package rejection

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// promptMessages is a sample's prompt as teacher messages.
func promptMessages(s *expand.Sample) []worldmodel.Message {
	prompt := s.Prompt()
	msgs := make([]worldmodel.Message, len(prompt))
	for i, m := range prompt {
		msgs[i] = worldmodel.Message{Role: m.Role, Content: m.Content}
	}
	return msgs
}

// request is beam b's teacher request for a sample whose prompt is msgs
// (shared by the beams; nothing downstream modifies it).
func (r *runner) request(msgs []worldmodel.Message, b int) worldmodel.Request {
	seed := r.o.Seed + int64(b)
	req := worldmodel.Request{Messages: msgs, Temperature: r.o.Temperature, TopP: r.o.TopP, Seed: &seed}
	if r.o.MaxTokens > 0 {
		req.MaxTokens = r.o.MaxTokens
	}
	return req
}

// beam generates and scores one beam; it holds a slot of the in-flight
// bound (taken by the reader) until the teacher answered, or an earlier
// run's journaled answer to the same request was found. Only
// cancellation and an endpoint that stays unavailable are errors; a
// request the teacher refuses becomes a candidate with its error.
func (r *runner) beam(ctx context.Context, j *job, b int) (*Candidate, error) {
	if r.o.Queue != nil {
		return r.remoteBeam(ctx, j, b)
	}
	s := j.s
	c := &Candidate{ID: fmt.Sprintf("%s-%d-%d", s.TrajectoryID, s.Turn, b), Seq: j.seq, Sample: s.ID,
		TrajectoryID: s.TrajectoryID, Domain: s.Domain, Turn: s.Turn, Beam: b}
	// The record is built after the answer is journaled (a journal that
	// falls behind then holds no history copies) and used until scored.
	defer j.record.release()
	req := r.request(j.prompt.get(func() []worldmodel.Message { return promptMessages(s) }), b)
	c.key = req.Hash(r.o.TeacherModel)
	resp := r.answers[c.key]
	fresh := resp == nil
	var err error
	if fresh {
		r.requests.Add(1)
		resp, err = r.o.Teacher.Complete(ctx, req)
	} else {
		r.reused.Add(1)
	}
	// The slot is the teacher's: it is free once the teacher answered,
	// before the journaling and the scoring.
	<-r.sem
	j.prompt.release()
	if fresh {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, worldmodel.ErrRejected) {
				c.Error = fmt.Sprintf("teacher %s refused beam %s: %v", r.o.TeacherModel, c.ID, err)
				r.log.Warn("beam failed", "id", c.ID, "err", err)
				return c, nil
			}
			return nil, fmt.Errorf("teacher %s, beam %s: %w (finished beams are kept; rerun to resume)", r.o.TeacherModel, c.ID, err)
		}
		// Journaled at once, so a kill during the (possibly slow) judging
		// never costs this answer again. A queue's worker keeps no
		// journal (no scored channel): its beam is stored whole or not at
		// all.
		if r.scored != nil {
			if err := r.toJournal(ctx, &entry{line: journalLine{Key: c.key, Seq: j.seq, Beam: b, Answer: resp}}); err != nil {
				return nil, err
			}
		}
	}
	c.Content, c.FinishReason = resp.Content, resp.FinishReason
	c.Reasoning = resp.Reasoning
	if c.Reasoning == "" {
		c.Reasoning = conversation.Reasoning(resp.Content)
	}
	c.Prediction = conversation.ExtractPrediction(resp.Content)
	rec := j.record.get(func() *trajectory.Record { return sampleRecord(s) })
	res := r.o.Scorer.Score(ctx, rewardItem(s, rec, c))
	if res.Dropped && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// How this run came by the verdict (a cache hit of an identical beam,
	// the attempts it took) depends on timing; the outputs keep only the
	// verdict, so a resumed run writes the same bytes as an uninterrupted one.
	res.Judge.Cached, res.Judge.Attempts = false, 0
	c.Reward = &res
	return c, nil
}

// rewardItem is the reward's view of a beam: the generation against the
// sample's real observation, with the sample's history as a record (rec,
// sampleRecord's) so the judge sees the conversation. The record is handed
// over as is (reward.Item.Record): encoding it per beam for the scorer to
// decode again was a large share of a fast run's CPU. The scorer only
// reads it, so the beams of a sample share it.
func rewardItem(s *expand.Sample, rec *trajectory.Record, c *Candidate) reward.Item {
	return reward.Item{ID: c.ID, GroupID: s.ID, DataSource: "agentworld/" + s.Domain, Prompt: s.Action,
		Response: c.Content, GroundTruth: s.Observation, Record: rec}
}

// sampleRecord is a sample as the record the judge reads: its history and
// the action to predict, with the real observations as the responses.
func sampleRecord(s *expand.Sample) *trajectory.Record {
	rec := &trajectory.Record{Task: "agentworld/" + s.Domain, ID: trajectory.StringID(s.TrajectoryID),
		SystemStr: s.System, TurnIdx: s.Turn, TotalTurns: s.TotalTurns}
	rec.Prompt = make([]string, 0, len(s.History)+1)
	rec.Response = make([]string, 0, len(s.History)+1)
	for i, h := range s.History {
		rec.Prompt = append(rec.Prompt, conversation.ActionPrompt(i+1, h.Action))
		rec.Response = append(rec.Response, conversation.ObservationResponse(h.Observation))
	}
	rec.Prompt = append(rec.Prompt, conversation.ActionPrompt(s.Turn, s.Action))
	rec.Response = append(rec.Response, conversation.ObservationResponse(s.Observation))
	rec.TurnIdx = len(rec.Prompt)
	rec.CurrentPrompt = rec.Prompt[rec.TurnIdx-1]
	rec.TotalTurns = max(rec.TotalTurns, rec.TurnIdx)
	return rec
}
