package grpclimit

import (
	"sync"

	"google.golang.org/grpc"
)

// messageNamespace prefixes the keys a stream's messages are counted
// under, so that they never share a counter with the calls' count, even on
// the same limiter.
const messageNamespace = "msg|"

// messageStream charges each message a stream receives to the message
// limiter (WithMessageLimiter). Once a message is refused, every RecvMsg
// returns the refusal, and the interceptor ends the stream with it.
type messageStream struct {
	grpc.ServerStream
	c        *config
	key      string // the stream's key, in the messages' namespace
	identity string // the key function's, for QuotaFailure

	mu      sync.Mutex
	refused error
}

// RecvMsg receives a message and then charges it: a message refused is
// dropped, and the stream's refusal returned instead.
func (s *messageStream) RecvMsg(m any) error {
	if err := s.refusal(); err != nil {
		return err
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	a := s.c.judge(s.Context(), s.c.msgs, s.key, s.identity, 1)
	if a.err == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = a.err
		if len(a.trailer) > 0 {
			s.SetTrailer(a.trailer)
		}
	}
	return s.refused
}

// refusal returns the status a refused message ended the stream with, nil
// while none was refused.
func (s *messageStream) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}
