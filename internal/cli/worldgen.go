package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldgen"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func newWorldGenerateCmd() *cobra.Command {
	var (
		o                     worldgen.Options
		genURL, genKey, out   string
		wmURL, wmModel, wmKey string
		judgeURL, judgeModel  string
		judgeKey              string
		seedsPath, domains    string
		nearDup               float64
		fromMCP               []string
	)
	cmd := &cobra.Command{
		Use:   "generate --count N --generator-url URL --generator-model M --out LIB",
		Short: "Generate worlds and tasks with checks by an LLM, proven in simulation, into a world library",
		Long: `Ask a generator model for --count candidates, each a world spec in the
unified schema with tasks (instruction, difficulty, a success check and a
reference solution), from seed descriptions (--seeds), from mutations of
imported MCP worlds (--from-mcp spec files, e.g. written by "world
from-mcp"), or from a domain x topic mixture (--domains; "fiction" draws
invented search worlds whose documents and questions are rendered from a
generated fact graph). Every candidate climbs the validation ladder:
schema and tool-schema compilation (a judged check only with
--success-judge-url), actions parse, near-duplicates
collapse, the check not met by the initial state, fictional answers
retrievable, the reference passing in 4 of 5 simulated replays (the world
model: --world-model-url, default the generator), a no-op and a random
agent passing in none. Survivors enter LIB with provenance; the counts
per rung and every rejection's reason go to LIB/generate/. A rerun with
the same flags resumes: no generator answer is asked for twice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case o.Count <= 0:
				return flagErr("count", errors.New("required (at least 1)"))
			case genURL == "":
				return flagErr("generator-url", errors.New("required"))
			case o.GeneratorModel == "":
				return flagErr("generator-model", errors.New("required"))
			case out == "":
				return flagErr("out", errors.New("required"))
			case nearDup > 1:
				return flagErr("near-duplicate", fmt.Errorf("%v: a similarity is at most 1 (0 compares exact fingerprints only)", nearDup))
			}
			o.NearDuplicate = nearDup
			if nearDup <= 0 {
				o.NearDuplicate = -1
			}
			if seedsPath != "" {
				s, err := worldgen.LoadSeeds(seedsPath)
				if err != nil {
					return flagErr("seeds", err)
				}
				o.Seeds = s
			}
			for _, p := range fromMCP {
				s, err := world.Load(p)
				if err != nil {
					return flagErr("from-mcp", err)
				}
				o.FromMCP = append(o.FromMCP, s)
			}
			for d := range strings.SplitSeq(domains, ",") {
				if d = strings.TrimSpace(d); d != "" {
					o.Domains = append(o.Domains, d)
				}
			}
			log := logger(cmd)
			o.Generator = worldmodel.New(genURL, o.GeneratorModel, &worldmodel.Options{APIKey: genKey, Logger: log})
			if wmURL == "" {
				wmURL, wmModel, wmKey = genURL, o.GeneratorModel, genKey
			}
			o.WorldModel = worldmodel.New(wmURL, wmModel, &worldmodel.Options{APIKey: wmKey, Logger: log})
			if judgeURL != "" {
				o.SuccessJudge = judge.NewSuccessJudge(worldmodel.New(judgeURL, judgeModel, &worldmodel.Options{APIKey: judgeKey, Logger: log}), judgeModel, nil)
			}
			o.Progress, o.Logger = cmd.ErrOrStderr(), log
			fmt.Fprintf(cmd.ErrOrStderr(), "estimate: %s\n", worldgen.EstimateCost(o, o.Count))
			st, err := worldgen.Run(cmd.Context(), out, o)
			if st != nil {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "%d candidates: %d worlds and %d tasks accepted into %s\n", st.Candidates, st.AcceptedWorlds, st.AcceptedTasks, out)
				for i, r := range st.Worlds {
					fmt.Fprintf(w, "  %-15s worlds %4d survived %4d rejected   tasks %5d survived %5d rejected\n", r.Rung, r.Survived, r.Rejected, st.Tasks[i].Survived, st.Tasks[i].Rejected)
				}
				fmt.Fprintf(w, "spent: %d generator requests (%d prompt + %d completion tokens), %d world-model steps\n", st.GeneratorRequests, st.PromptTokens, st.CompletionTokens, st.SimSteps)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Count, "count", 0, "candidates to generate (each a world with its tasks)")
	fl.StringVar(&genURL, "generator-url", "", "generator model server base URL (http://host:8000/v1)")
	fl.StringVar(&o.GeneratorModel, "generator-model", "", "generator model name")
	fl.StringVar(&genKey, "generator-api-key", "", "bearer token sent to the generator")
	fl.StringVar(&wmURL, "world-model-url", "", "world model simulating the ladder's replays (default: the generator)")
	fl.StringVar(&wmModel, "world-model", "", "world model name (with --world-model-url)")
	fl.StringVar(&wmKey, "world-model-api-key", "", "bearer token sent to the world model")
	fl.StringVar(&judgeURL, "success-judge-url", "", "a model deciding the replays of tasks with a judged check (none: such tasks are rejected)")
	fl.StringVar(&judgeModel, "success-judge-model", "", "success judge model name")
	fl.StringVar(&judgeKey, "success-judge-api-key", "", "bearer token sent to the success judge")
	fl.StringVar(&out, "out", "", "world library directory (created; a rerun resumes)")
	fl.StringVar(&seedsPath, "seeds", "", `seed descriptions: one per line, or JSONL {"id", "description"}`)
	fl.StringArrayVar(&fromMCP, "from-mcp", nil, "an imported MCP world spec to mutate (repeatable)")
	fl.StringVar(&domains, "domains", "", "mixture domains, comma-separated (mcp, search, terminal, swe, web, android, os, fiction; default all)")
	fl.Int64Var(&o.Seed, "seed", 1, "run seed: the same seed plans the same candidates")
	fl.IntVar(&o.Concurrency, "concurrency", worldgen.DefaultConcurrency, "candidates in flight at once")
	fl.IntVar(&o.TasksPerWorld, "tasks-per-world", worldgen.DefaultTasksPerWorld, "tasks asked of the generator per world")
	fl.IntVar(&o.MaxTokens, "generator-max-tokens", worldgen.DefaultMaxTokens, "generator budget per candidate")
	fl.Float64Var(&nearDup, "near-duplicate", worldgen.DefaultNearDuplicate, "similarity (0-1, Jaccard of word 3-shingles of description and state) at which a world with the same tools as an earlier one collapses into it; 0: exact fingerprints only")
	return cmd
}
