package redis

import (
	"context"
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// followFailovers makes c reload the cluster's topology (CLUSTER SLOTS from a node that
// answers, in the background; reloads asked for meanwhile are coalesced) as soon as a call fails
// in a way a failover or a resharding explains. go-redis reloads it by itself only on a MOVED
// or ASK reply, and once its copy is a minute old: a master killed answers no MOVED, and the
// slots its replica took over were sent to the dead address, refused, for up to that minute
// after the cluster was ok again. A call that succeeds costs nothing more.
func followFailovers(c *goredis.ClusterClient) *goredis.ClusterClient {
	c.AddHook(topologyWatch{reload: func() { c.ReloadState(context.Background()) }})
	return c
}

// topologyWatch is a go-redis hook calling reload after a call that failed as topologyMayHaveChanged says.
type topologyWatch struct{ reload func() }

func (w topologyWatch) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (w topologyWatch) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if topologyMayHaveChanged(err) {
			w.reload()
		}
		return err
	}
}

func (w topologyWatch) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if topologyMayHaveChanged(cmd.Err()) {
				w.reload()
				break
			}
		}
		return err
	}
}

// topologyMayHaveChanged reports whether err may come from a node that is gone or no longer
// serves the slot: no reply at all (a connection refused, reset or timed out) or a cluster
// that says it cannot serve the slot now (CLUSTERDOWN, TRYAGAIN, MASTERDOWN). A reply of any
// other kind (NOSCRIPT, NOGROUP, a script's error, nil) came from a node serving the slot, and a
// call its caller cancelled says nothing.
func topologyMayHaveChanged(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var reply goredis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "MASTERDOWN")
	}
	return true
}
