package main

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The grpc kind: gRPC-Go unary calls over insecure HTTP/2 on kernel TCP,
// the standard a Go service team picks for request and reply. Requests
// and replies are raw bytes through a codec of the benchmark's own (no
// protobuf marshalling), the fastest a gRPC user gets; the service is
// described by hand (grpcEcho), as protoc would generate it.

func init() {
	registerRPC(&rpcKind{
		name:  "grpc",
		about: "gRPC-Go " + grpc.Version + " unary calls, insecure HTTP/2, a raw-bytes codec",
		serve: serveGRPC,
		dial:  dialGRPC,
	})
}

// rawCodec passes bytes through: Marshal takes a *[]byte and returns its
// bytes, Unmarshal appends the message to the *[]byte's first bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	p, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: marshalling a %T, not a *[]byte", v)
	}
	return *p, nil
}

func (rawCodec) Unmarshal(b []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: unmarshalling into a %T, not a *[]byte", v)
	}
	*p = append((*p)[:0], b...)
	return nil
}

func (rawCodec) Name() string { return "raw" }

// grpcMethod is the echo service's one method.
const grpcMethod = "/tachyon.bench.Echo/Call"

// grpcEcho describes the echo service; its handler is the server's
// rpcHandler.
var grpcEcho = grpc.ServiceDesc{
	ServiceName: "tachyon.bench.Echo",
	HandlerType: (*any)(nil), // the server is an rpcHandler; grpc asks only that it be something
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req []byte
			if err := dec(&req); err != nil {
				return nil, err
			}
			rep := srv.(rpcHandler)(nil, req)
			return &rep, nil
		},
	}},
}

// serveGRPC answers on addr until ctx ends.
func serveGRPC(ctx context.Context, addr string, h rpcHandler, ready func()) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.MaxRecvMsgSize(rpcMaxSize+1<<10))
	s.RegisterService(&grpcEcho, h)
	stop := context.AfterFunc(ctx, s.Stop)
	defer stop()
	ready()
	if err := s.Serve(ln); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// grpcConn is the grpc kind's client.
type grpcConn struct {
	cc  *grpc.ClientConn
	ctx context.Context
}

func dialGRPC(ctx context.Context, addr string) (rpcConn, error) {
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(2*rpcMaxSize+1<<10)))
	if err != nil {
		return nil, err
	}
	// NewClient connects lazily: connect now, so that the first call
	// does not time the connection.
	cc.Connect()
	return &grpcConn{cc: cc, ctx: context.Background()}, nil
}

func (g *grpcConn) call(req, rep []byte) (int, error) {
	out := rep[:0]
	if err := g.cc.Invoke(g.ctx, grpcMethod, &req, &out); err != nil {
		return 0, err
	}
	if len(out) > len(rep) {
		return 0, fmt.Errorf("%w: %d bytes", errReplyTooLong, len(out))
	}
	return len(out), nil
}

func (g *grpcConn) close() error { return g.cc.Close() }
