package masking

import (
	"context"
	"io"
	"strconv"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// MaskRow is one line of `agentworld data mask` output: the statistics,
// category and loss weight of one turn. Turn is 1-based.
type MaskRow struct {
	ID       string  `json:"id"`
	Domain   string  `json:"domain"`
	Turn     int     `json:"turn"`
	Category string  `json:"category"`
	Weight   float64 `json:"weight"`
	OL       float64 `json:"ol"`
	Nov      float64 `json:"nov"`
	Jac      float64 `json:"jac"`
	R        float64 `json:"r"`
	ActWords int     `json:"act_words"`
	ObsWords int     `json:"obs_words"`
}

// appendMaskRow writes a MaskRow line; idLit and domainLit are JSON string
// literals. Floats use the shortest round-trip form, as Python's repr does.
func appendMaskRow(b, idLit, domainLit []byte, turn int, st *Stats, cat *Category) []byte {
	b = append(b, `{"id":`...)
	b = append(b, idLit...)
	b = append(b, `,"domain":`...)
	b = append(b, domainLit...)
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, int64(turn), 10)
	b = append(b, `,"category":`...)
	b = strconv.AppendQuote(b, cat.Name)
	b = append(b, `,"weight":`...)
	b = appendFloat(b, cat.Weight)
	b = append(b, `,"ol":`...)
	b = appendFloat(b, st.OL)
	b = append(b, `,"nov":`...)
	b = appendFloat(b, st.Nov)
	b = append(b, `,"jac":`...)
	b = appendFloat(b, st.Jac)
	b = append(b, `,"r":`...)
	b = appendFloat(b, st.R)
	b = append(b, `,"act_words":`...)
	b = strconv.AppendInt(b, int64(st.ActWords), 10)
	b = append(b, `,"obs_words":`...)
	b = strconv.AppendInt(b, int64(st.ObsWords), 10)
	return append(b, "}\n"...)
}

func appendFloat(b []byte, f float64) []byte {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		b = strconv.AppendInt(b, int64(f), 10)
		return append(b, ".0"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// canonLiteral re-encodes a string literal that has escapes so both mask
// paths write the same bytes.
func canonLiteral(lit []byte) []byte {
	for _, c := range lit {
		if c == '\\' {
			var s string
			if err := jsonUnmarshalString(lit, &s); err == nil {
				b, _ := trajectory.Marshal(s)
				return b
			}
			return lit
		}
	}
	return lit
}

// Mask reads unified trajectories from files and writes one MaskRow line per
// turn to out, in input order. cfg nil means the default categories.
func Mask(ctx context.Context, files []string, out io.Writer, cfg *MaskingConfig, opts *datapipe.Options) (*datapipe.Summary, error) {
	if cfg == nil {
		var err error
		if cfg, err = LoadMaskingConfig(""); err != nil {
			return nil, err
		}
	}
	o := opts.Norm()
	type state struct {
		sc Scorer
		rt rawTrajectory
	}
	states := make([]state, o.Workers)
	sum := &datapipe.Summary{}
	err := datapipe.Run(ctx, files, o, sum, func(w int, batch []datapipe.InLine) ([]byte, []*datapipe.RecordError, int64, error) {
		st := &states[w]
		var buf []byte
		var errs []*datapipe.RecordError
		var ok int64
		for _, l := range batch {
			if walkTrajectory(l.Data, &st.rt) {
				id, dom := st.rt.id, canonLiteral(st.rt.domain)
				if id == nil {
					id = []byte(`""`)
				} else {
					id = canonLiteral(id)
				}
				dc := cfg
				if len(cfg.byDomain) > 0 {
					var name string
					if err := jsonUnmarshalString(dom, &name); err == nil {
						dc = cfg.For(name)
					}
				}
				for i, t := range st.rt.turns {
					s := st.sc.ScoreJSON(t.action, t.observation)
					buf = appendMaskRow(buf, id, dom, i+1, &s, &dc.Categories[dc.Classify(&s)])
				}
				ok++
				continue
			}
			t, es := datapipe.DecodeTrajectory(l.Data, l.File, l.N)
			if len(es) > 0 {
				errs = append(errs, es...)
				continue
			}
			id, _ := trajectory.Marshal(t.ID)
			dom, _ := trajectory.Marshal(t.Domain)
			dc := cfg.For(t.Domain)
			for i, tu := range t.Turns {
				s := st.sc.Score(tu.Action, tu.Observation)
				buf = appendMaskRow(buf, id, dom, i+1, &s, &dc.Categories[dc.Classify(&s)])
			}
			ok++
		}
		return buf, errs, ok, nil
	}, func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		_, err := out.Write(b)
		for i := range b {
			if b[i] == '\n' {
				sum.Written++
			}
		}
		return err
	})
	return sum, err
}
