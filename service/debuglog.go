package service

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/clip"

	"github.com/sluicehq/sluice/config"
)

// maxLogField bounds, in bytes, each field of a debug line that the client
// chose (the domain, the descriptor's entries, the store key made of
// them): what is past it is cut and its length given instead.
const maxLogField = 256

// logDecision logs one descriptor's decision at debug level, as
// envoyproxy/ratelimit's debug log names the rule it found and the cache
// key it used: the domain, the descriptor's index and entries, the
// matched rule's full key ("" for none; "_override" for a limit override
// that matched no rule), the store key (when a limited rule matched) and
// the code. Its caller checks that debug is enabled, so that at info
// level a decision costs nothing here.
func (s *Service) logDecision(ctx context.Context, domain string, i int, p *plan, o outcome) {
	rule, key := "", ""
	if r := p.rule; r != nil {
		rule = r.FullKey
		if p.label == overrideLabel {
			rule = overrideLabel
		}
		if !r.Unlimited {
			key = s.keyOf(domain, p)
		}
	}
	attrs := []slog.Attr{
		slog.String("domain", bounded(domain)),
		slog.Int("descriptor", i),
		slog.String("entries", entriesText(p.entries)),
		slog.String("rule", rule),
		slog.String("key", bounded(key)),
		slog.String("code", o.st.GetCode().String()),
	}
	if o.denied && !o.over {
		attrs = append(attrs, slog.Bool("shadow", true))
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "rate limit decision", attrs...)
}

// bounded returns s cut to maxLogField bytes (at a rune's start), with
// its full length after the cut.
func bounded(s string) string {
	head, cut := clip.Cut(s, maxLogField)
	if !cut {
		return s
	}
	return head + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// entriesText spells a descriptor's entries as key=value joined by
// commas, at most maxLogField bytes of them: the work is bounded by the
// field, not by how many entries the client sent.
func entriesText(es []config.Entry) string {
	var b strings.Builder
	for j, e := range es {
		if b.Len() >= maxLogField {
			return bounded(b.String()) + "…(" + strconv.Itoa(len(es)) + " entries)"
		}
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(bounded(e.Key))
		b.WriteByte('=')
		b.WriteString(bounded(e.Value))
	}
	return bounded(b.String())
}
