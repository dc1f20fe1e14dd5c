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

func newEloop(*target, int, *emitter, func(int) *schedule) (*eloop, error) {
	return nil, errors.ErrUnsupported
}

func (*eloop) serve(*lib.State, time.Time) {}

type counts struct{ reqs, fails, late, clientLate, dropped int64 }

func (*eloop) collect(context.Context, time.Time, bool) counts { return counts{} }
