// Package runpin ties an output directory to the settings of the run that
// made it. Long jobs resume into their output directory after a kill; a
// rerun with other settings (another model, temperature, group size…)
// would silently mix two runs' results in one file, so it is refused
// instead, naming both settings. `data sample` and `rollout` pin their
// directories with it; bench keeps a richer record of its own (run.json
// with the model and judge) for the same purpose.
package runpin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/agentworld/agentworld/internal/atomicfile"
)

// ErrSettingsChanged means the output directory holds a run made with
// other settings.
var ErrSettingsChanged = errors.New("output directory holds a run with different settings")

// Check compares settings, as JSON, with those recorded in dir/file by an
// earlier run, and records them when there are none yet (the file written
// atomically). It returns an error wrapping ErrSettingsChanged, naming the
// directory and both settings, when they differ.
func Check(dir, file string, settings any) error {
	nb, err := json.Marshal(settings)
	if err != nil {
		return fmt.Errorf("run settings: %w", err)
	}
	path := filepath.Join(dir, file)
	if ob, err := os.ReadFile(path); err == nil {
		var old, cur any
		if err := json.Unmarshal(ob, &old); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		_ = json.Unmarshal(nb, &cur)
		if !reflect.DeepEqual(old, cur) {
			compact, _ := json.Marshal(old)
			return fmt.Errorf("%w: %s holds %s; this run is %s; use another output directory", ErrSettingsChanged, dir, compact, nb)
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), nil)
}
