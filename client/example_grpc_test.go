package client_test

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// A gRPC client that paces itself below the server's limit, waits as a
// refusal's RetryInfo says, and retries only the methods it names (and
// those whose proto says idempotency_level = IDEMPOTENT or
// NO_SIDE_EFFECTS).
func ExampleGRPC() {
	g := &client.GRPC{
		Backoff:    client.Backoff{MaxAttempts: 4, Cap: 10 * time.Second},
		Idempotent: client.IdempotentMethods("/shop.Orders/Get"),
		Pacer:      &client.Pacer{Limit: sluice.PerSecond(90)}, // the server allows 100/s
	}
	cc, err := grpc.NewClient("orders.internal:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(g.UnaryClientInterceptor()),
		grpc.WithStreamInterceptor(g.StreamClientInterceptor()),
	)
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	// Make clients on cc as usual.
}
