package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandNamesItsPage: the help of every command, subcommands
// included, ends with the manual page that explains it, and the page exists.
func TestEveryCommandNamesItsPage(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		page := docPage(c)
		if page == "" {
			t.Errorf("%q has no manual page: add its top-level command to docPages", c.CommandPath())
		} else if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(page))); err != nil {
			t.Errorf("%q names %s: %v", c.CommandPath(), page, err)
		}
		var out bytes.Buffer
		c.SetOut(&out)
		if err := c.Usage(); err != nil {
			t.Fatal(err)
		}
		if page != "" && !strings.Contains(out.String(), "Manual: "+page) {
			t.Errorf("%q's help does not name %s:\n%s", c.CommandPath(), page, out.String())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(New())
}
