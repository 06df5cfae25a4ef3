import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy on loopback that can go silent: while silent it forwards nothing either way and
/// holds what it receives (closings too), as a network that dropped its packets would; once
/// heard again it delivers what it held, as TCP's retransmissions would once the network healed.
final class SilenceableProxy: Sendable {
  private let server: any Channel
  private let state = Shared()

  private struct Held {
    var isSilent = false
    /// What arrived while silent, in order: bytes for a channel, or its peer's closing.
    var pending: [(to: any Channel, bytes: ByteBuffer?)] = []
  }

  /// What the proxy's connections share.
  private final class Shared: Sendable {
    let held = Mutex(Held())
  }

  /// The port it listens on.
  var port: Int { self.server.localAddress?.port ?? 0 }

  /// Listens on 127.0.0.1 (any free port) and forwards each connection to `targetPort`.
  init(to targetPort: Int) async throws {
    let held = self.state
    self.server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .childChannelInitializer { inbound in
        ClientBootstrap(group: inbound.eventLoop)
          .connect(host: "127.0.0.1", port: targetPort)
          .flatMap { outbound in
            outbound.pipeline.addHandler(Forward(to: inbound, held: held)).flatMap {
              inbound.pipeline.addHandler(Forward(to: outbound, held: held))
            }
          }
      }
      .bind(host: "127.0.0.1", port: 0)
      .get()
  }

  /// Stops forwarding: what arrives is held.
  func silence() {
    self.state.held.withLock { $0.isSilent = true }
  }

  /// Forwards again, first delivering what was held.
  func hear() {
    let pending = self.state.held.withLock { held in
      held.isSilent = false
      defer { held.pending = [] }
      return held.pending
    }
    for (channel, bytes) in pending {
      if let bytes {
        channel.writeAndFlush(bytes, promise: nil)
      } else {
        channel.close(promise: nil)
      }
    }
  }

  func close() async {
    try? await self.server.close()
  }

  /// Writes what one side reads to the other side, unless the proxy is silent.
  private final class Forward: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let peer: any Channel
    let held: Shared

    init(to peer: any Channel, held: Shared) {
      self.peer = peer
      self.held = held
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
      self.pass(self.unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
      self.pass(nil)
    }

    private func pass(_ bytes: ByteBuffer?) {
      let holds = self.held.held.withLock { held in
        if held.isSilent { held.pending.append((self.peer, bytes)) }
        return held.isSilent
      }
      guard !holds else { return }
      if let bytes {
        self.peer.writeAndFlush(bytes, promise: nil)
      } else {
        self.peer.close(promise: nil)
      }
    }
  }
}
