package replay

import (
	"context"
	"fmt"
)

// Portkey is Portkey's open-source gateway installed from npm in dir.
func Portkey(dir string) Policy {
	return Policy{Name: NamePortkey, Start: func(context.Context, *Env) (Caller, error) {
		return nil, fmt.Errorf("%w: the Portkey gateway is not wired in yet (%s)", ErrUnavailable, dir)
	}}
}
