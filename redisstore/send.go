package redisstore

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Where script calls leave for Redis in a pipeline: the batches' calls
// (send) and the lease worker's renewals and returns go through
// sendPipelined, the one place that sends again, with the script's source,
// the calls Redis had lost the script for. A call alone goes by the
// script's Run, which does the same for one call.

// send sends the calls, together in one pipeline when there are several,
// with the scripts Redis has lost sent in full once more.
func send(ctx context.Context, client redis.UniversalClient, calls []*scriptCall) {
	if len(calls) == 1 {
		c := calls[0]
		c.cmd = c.scriptOf().Run(ctx, client, c.keys, c.args...)
		return
	}
	cmds := sendPipelined(ctx, client, len(calls), func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
		c := calls[i]
		if eval {
			return c.scriptOf().Eval(ctx, p, c.keys, c.args...)
		}
		return c.scriptOf().EvalSha(ctx, p, c.keys, c.args...)
	})
	for i, c := range calls {
		c.cmd = cmds[i]
	}
}

// sendPipelined sends n script calls made by call in one pipeline, within
// ctx, by their scripts' SHA; those Redis had not loaded the script for
// (NOSCRIPT: not run) go once more, together, with the script's source
// (eval). It returns their commands.
func sendPipelined(ctx context.Context, client redis.UniversalClient, n int, call func(p redis.Pipeliner, i int, eval bool) *redis.Cmd) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = call(p, i, false)
		}
		return nil
	})
	var lost []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 {
		_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range lost {
				cmds[i] = call(p, i, true)
			}
			return nil
		})
	}
	return cmds
}
