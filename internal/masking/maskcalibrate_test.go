package masking

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/datapipe"
)

// TestCalibrateRoundTrip calibrates on the bundled test corpus, writes the
// config as YAML, reads it back, and requires `data mask` under it to give
// every domain exactly the shares the calibration reported, with the base
// shares matching the default config's.
func TestCalibrateRoundTrip(t *testing.T) {
	const path = "../datapipe/testdata/small.jsonl"
	c, _, err := Calibrate(context.Background(), []string{path}, nil, &CalibrateOptions{MinTurns: 10}, &datapipe.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Config.Domains) != len(c.Domains) {
		t.Fatalf("%d domains calibrated of %d", len(c.Config.Domains), len(c.Domains))
	}
	var yml bytes.Buffer
	if err := c.Config.Encode(&yml, "yaml"); err != nil {
		t.Fatal(err)
	}
	back, err := ParseMaskingConfig(yml.Bytes(), "calibrated")
	if err != nil {
		t.Fatalf("%v\n%s", err, yml.String())
	}
	shares := func(cfg *MaskingConfig) map[string]map[string]float64 {
		var out bytes.Buffer
		if _, err := Mask(context.Background(), []string{path}, &out, cfg, nil); err != nil {
			t.Fatal(err)
		}
		counts, turns := map[string]map[string]float64{}, map[string]float64{}
		for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var r MaskRow
			if err := json.Unmarshal(l, &r); err != nil {
				t.Fatal(err)
			}
			if counts[r.Domain] == nil {
				counts[r.Domain] = map[string]float64{}
			}
			counts[r.Domain][r.Category]++
			turns[r.Domain]++
		}
		for d, m := range counts {
			normalize(m, int(turns[d]))
		}
		return counts
	}
	gotQ, gotB := shares(back), shares(nil)
	changed := false
	for _, d := range c.Domains {
		if diff := cmp.Diff(d.Quantile, gotQ[d.Domain]); diff != "" {
			t.Errorf("%s: calibrated shares reported vs masked (-reported +masked):\n%s", d.Domain, diff)
		}
		if diff := cmp.Diff(d.Base, gotB[d.Domain]); diff != "" {
			t.Errorf("%s: base shares reported vs masked:\n%s", d.Domain, diff)
		}
		if !cmp.Equal(d.Base, d.Quantile) {
			changed = true
		}
	}
	if !changed {
		t.Error("calibration changed no domain's shares on a corpus of differing domains")
	}
	var table bytes.Buffer
	if err := c.WriteTable(&table); err != nil || !strings.Contains(table.String(), "all") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
}

// TestCalibrateOneDomainIsIdentity: when the corpus is one domain, its
// quantiles are the pooled quantiles, so every bound must select exactly
// the turns the base bound selects.
func TestCalibrateOneDomainIsIdentity(t *testing.T) {
	data, _ := os.ReadFile("../datapipe/testdata/small.jsonl")
	var one []byte
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if bytes.Contains(l, []byte(`"domain":"swe"`)) {
			one = append(append(one, l...), '\n')
		}
	}
	if len(one) == 0 {
		t.Fatal("no swe trajectory in the corpus")
	}
	path := filepath.Join(t.TempDir(), "swe.jsonl")
	os.WriteFile(path, one, 0o644)
	c, _, err := Calibrate(context.Background(), []string{path}, nil, &CalibrateOptions{MinTurns: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domains) != 1 || !c.Domains[0].Calibrated {
		t.Fatalf("domains %+v", c.Domains)
	}
	if d := cmp.Diff(c.Domains[0].Base, c.Domains[0].Quantile); d != "" {
		t.Fatalf("one-domain calibration changed the shares:\n%s", d)
	}
}

// TestCalibrateSmallDomainsKeepBase: a domain under MinTurns gets no bounds
// of its own and so exactly the base shares.
func TestCalibrateSmallDomainsKeepBase(t *testing.T) {
	c, _, err := Calibrate(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, nil, &CalibrateOptions{MinTurns: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Config.Domains) != 0 {
		t.Fatalf("domains calibrated below MinTurns: %v", c.Config.Domains)
	}
	for _, d := range c.Domains {
		if d.Calibrated || !cmp.Equal(d.Base, d.Quantile) {
			t.Fatalf("%+v", d)
		}
	}
}

func TestQuantileBounds(t *testing.T) {
	s := []float64{0, 0, 1, 1, 1, 2, 3, 5}
	cases := []struct {
		name string
		got  float64
		want float64
	}{
		{"rankBelow 1", rankBelow(s, 1), 2.0 / 8},
		{"rankAtMost 1", rankAtMost(s, 1), 5.0 / 8},
		{"rankAtMost 4", rankAtMost(s, 4), 7.0 / 8},
		{"minBoundAt rankBelow 1", minBoundAt(s, rankBelow(s, 1)), 1},
		{"minBoundAt rankBelow 4", minBoundAt(s, rankBelow(s, 4)), 5},
		{"maxBoundAt rankAtMost 4", maxBoundAt(s, rankAtMost(s, 4)), 3},
		{"maxBoundAt 0", maxBoundAt(s, 0), math.Nextafter(0, -1)},
		{"minBoundAt 1", minBoundAt(s, 1), math.Nextafter(5, 6)},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestDomainConfigValidation(t *testing.T) {
	base, _ := LoadMaskingConfig("")
	var yml bytes.Buffer
	bad := &MaskingConfig{Categories: base.Categories, Domains: map[string][]Category{"web": base.Categories[1:]}}
	if err := bad.Encode(&yml, "yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMaskingConfig(yml.Bytes(), "x.yaml"); err == nil || !strings.Contains(err.Error(), "domains.web") {
		t.Fatalf("a domain with other categories: %v", err)
	}
}
