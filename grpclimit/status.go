package grpclimit

import (
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
)

// refusal returns a status error of code with an ErrorInfo (reason, domain,
// and the method in its metadata), a RetryInfo when wait is positive, and
// quota when it is not nil.
func refusal(code codes.Code, msg, domain, reason, method string, wait time.Duration, quota *errdetails.QuotaFailure) error {
	info := &errdetails.ErrorInfo{
		Reason:   reason,
		Domain:   domain,
		Metadata: map[string]string{"method": method},
	}
	details := []protoadapt.MessageV1{info}
	if wait > 0 {
		// Rounded up to the millisecond, as grpc-retry-pushback-ms: a
		// client that waits what it is told is not early.
		wait = (wait + time.Millisecond - 1).Truncate(time.Millisecond)
		info.Metadata["retry_delay_ms"] = strconv.FormatInt(wait.Milliseconds(), 10)
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	}
	if quota != nil {
		details = append(details, quota)
	}
	st, err := status.New(code, msg).WithDetails(details...)
	if err != nil { // only for codes.OK, which no caller passes
		return status.Error(code, msg)
	}
	return st.Err()
}

// rateLimited returns the RESOURCE_EXHAUSTED refusal of a call whose key is
// over lim.
func rateLimited(domain, method, key string, lim sluice.Limit, cost int, res sluice.Result) error {
	q := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     key,
		Description: "the call costs " + strconv.Itoa(cost) + " of a limit of " + lim.String() + "; " + strconv.Itoa(res.Remaining) + " left",
		QuotaMetric: "calls",
		QuotaId:     lim.String(),
		QuotaValue:  int64(lim.Rate),
	}}}
	return refusal(codes.ResourceExhausted, "grpclimit: rate limit exceeded", domain, ReasonRateLimited, method, res.RetryAfter, q)
}
