// Package dimension checks the configured dimensions of the components that
// split their series by span or resource attributes (stall_metrics,
// hedge_advisor), so that both refuse the same mistakes with the same words.
package dimension // import "github.com/streamstall/streamstall/internal/dimension"

import "fmt"

// Check returns an error for each configured name that is empty, repeats an
// earlier one, or is one of reserved (set by the component itself).
func Check(names []string, reserved ...string) []error {
	seen := make(map[string]bool, len(reserved)+len(names))
	for _, name := range reserved {
		seen[name] = true
	}
	var errs []error
	for i, name := range names {
		switch {
		case name == "":
			errs = append(errs, fmt.Errorf("dimensions[%d]: name must not be empty", i))
		case seen[name]:
			errs = append(errs, fmt.Errorf("dimensions[%d]: duplicate or reserved dimension %q", i, name))
		}
		seen[name] = true
	}
	return errs
}
