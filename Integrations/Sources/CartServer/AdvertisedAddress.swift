import NIOCore

extension ServeOptions {
  /// How the other instances reach this one when `--advertise` is not given: `http://HOST:PORT`,
  /// where HOST is `--host` unless that is a wildcard.
  ///
  /// A wildcard (`0.0.0.0`, `::`) says where the server listens, not where it can be reached,
  /// and every instance started the same way (containers on one port) would advertise the same
  /// address: each would take every other's carts for its own, and answer 503 for them until
  /// their leases ran out, which an owner that stays up never lets happen. So a wildcard
  /// advertises an address of this machine, as Orleans advertises a silo: see
  /// ``reachableAddress(among:)``.
  func advertisedAddress(port: Int, interfaces: () -> [SocketAddress] = Self.interfaces) -> String {
    if let advertise { return advertise }
    let host = Self.isWildcard(self.host) ? Self.reachableAddress(among: interfaces()) : self.host
    // NB: an IPv6 literal takes brackets in a URL, where its colons would read as a port's.
    let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    return "http://\(bracketed):\(port)"
  }

  /// Whether `host` listens on every address of the machine.
  static func isWildcard(_ host: String) -> Bool {
    ["0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0"].contains(host)
  }

  /// The first of `addresses` another machine could reach.
  ///
  /// IPv4 before IPv6, never loopback, and no link-local IPv6 (reaching one needs the sender's own
  /// interface named). With none (a machine with loopback alone), `127.0.0.1`: then the
  /// instances can only share this machine.
  static func reachableAddress(among addresses: [SocketAddress]) -> String {
    func first(_ family: (SocketAddress) -> Bool) -> String? {
      addresses.first(where: family)?.ipAddress
    }
    let ipv4 = first { address in
      guard case .v4 = address, let ip = address.ipAddress else { return false }
      return !ip.hasPrefix("127.")
    }
    let ipv6 = first { address in
      guard case .v6 = address, let ip = address.ipAddress?.lowercased() else { return false }
      return ip != "::1" && !ip.hasPrefix("fe80:") && !ip.hasPrefix("::ffff:127.")
    }
    return ipv4 ?? ipv6 ?? "127.0.0.1"
  }

  /// The addresses of this machine's network interfaces (none if they cannot be listed).
  static func interfaces() -> [SocketAddress] {
    ((try? System.enumerateDevices()) ?? []).compactMap(\.address)
  }
}
