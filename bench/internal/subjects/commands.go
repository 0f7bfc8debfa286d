package subjects

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// commandCounter is a go-redis hook that counts the commands Redis answered
// its client: one for each command sent alone and one for each command of
// a pipeline or transaction (not the MULTI and EXEC that go-redis wraps a
// transaction in), answered with a value, nil or an error reply; a command
// that never got a reply (no connection, a timeout) is not counted. A
// script call (EVAL, EVALSHA) is one command however many it runs inside
// Redis. A new connection's handshake (HELLO, CLIENT SETINFO) counts too;
// a pub/sub connection's subscriptions do not. TestFloor checks that the
// floor's one GET a request counts one command a request, and none when
// Redis cannot be reached.
type commandCounter struct {
	n atomic.Int64
}

// count returns the commands counted so far.
func (c *commandCounter) count() int64 { return c.n.Load() }

// DialHook leaves dialling as it is.
func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one command.
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if answered(err) {
			c.n.Add(1)
		}
		return err
	}
}

// ProcessPipelineHook counts each command of the pipeline.
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		n := int64(0)
		for _, cmd := range cmds {
			if name := cmd.Name(); name != "multi" && name != "exec" && answeredIn(cmd.Err(), err) {
				n++
			}
		}
		c.n.Add(n)
		return err
	}
}

// answered reports whether a command's error, if any, is Redis's reply
// (redis.Nil included) rather than a failure to get one.
func answered(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply)
}

// answeredIn reports whether a pipeline's command was answered, given its
// error and the pipeline's: a failure to get replies may be the
// pipeline's alone.
func answeredIn(cmdErr, pipeErr error) bool {
	if cmdErr != nil {
		return answered(cmdErr)
	}
	return answered(pipeErr)
}
