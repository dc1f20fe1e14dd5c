//go:build !linux

package ingressbench

import (
	"context"
	"errors"
	"time"

	"go.k6.io/k6/lib"
)

// The epoll loop is Linux's (eloop.go); elsewhere every connection runs worker.loop.
type eloop struct{ e *emitter }

func eloopFor(*target) bool { return false }

func newEloop(*target, int, *emitter) (*eloop, error) { return nil, errors.ErrUnsupported }

func (*eloop) serve(*lib.State, time.Time) {}

func (*eloop) collect(context.Context, time.Time, bool) (reqs, fails int64) { return 0, 0 }
