import ExampleFeatures

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback TCP socket, closed once.
final class Socket: Sendable {
  let descriptor: Int32

  init(descriptor: Int32) {
    self.descriptor = descriptor
  }

  /// Listens on 127.0.0.1:`port` (0: an ephemeral port).
  static func listen(port: UInt16) throws(SocketError) -> (Socket, UInt16) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw SocketError("socket", errno) }
    var yes: Int32 = 1
    setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = Self.loopback(port: port)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0 else {
      let error = errno
      Glibc.close(descriptor)
      throw SocketError("bind 127.0.0.1:\(port)", error)
    }
    guard Glibc.listen(descriptor, 1024) == 0 else { throw SocketError("listen", errno) }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        getsockname(descriptor, $0, &length)
      }
    }
    return (Socket(descriptor: descriptor), UInt16(bigEndian: address.sin_port))
  }

  /// Connects to 127.0.0.1:`port`.
  static func connect(port: UInt16) throws(SocketError) -> Socket {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw SocketError("socket", errno) }
    var address = Self.loopback(port: port)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else {
      let error = errno
      Glibc.close(descriptor)
      throw SocketError("connect 127.0.0.1:\(port)", error)
    }
    return Socket(descriptor: descriptor)
  }

  private static func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
  }

  /// Accepts a connection; `nil` once the listening socket was shut down.
  ///
  /// Out of descriptors or memory (clients past the process's limit), it waits and tries again,
  /// from 5 ms doubling to a second, instead of ending the accept loop for good: the connections
  /// it cannot take yet wait in the backlog until others close.
  func accept() -> Socket? {
    var pause: UInt32 = 5_000
    while true {
      let descriptor = Glibc.accept(self.descriptor, nil, nil)
      if descriptor >= 0 { return Socket(descriptor: descriptor) }
      switch errno {
      case EINTR, ECONNABORTED:
        continue
      case EMFILE, ENFILE, ENOBUFS, ENOMEM:
        if pause == 5_000 {
          let reason = String(cString: strerror(errno))
          writeToStandardError(
            "line-server: cannot accept a connection (\(reason)); trying again\n"
          )
        }
        usleep(pause)
        pause = min(pause * 2, 1_000_000)
      default:
        return nil
      }
    }
  }

  /// Reads up to `count` bytes; 0 at the end of the stream or on an error.
  func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
    while true {
      let count = Glibc.read(self.descriptor, buffer.baseAddress, buffer.count)
      if count >= 0 { return count }
      if errno == EINTR { continue }
      return 0
    }
  }

  /// Writes all of `text`; `false` if the peer is gone.
  ///
  /// Without `blocking`, also `false` when the socket cannot take it now (a peer that does not read
  /// its replies).
  @discardableResult
  func write(_ text: String, blocking: Bool = true) -> Bool {
    let flags = Int32(MSG_NOSIGNAL) | (blocking ? 0 : Int32(MSG_DONTWAIT))
    var text = text
    return text.withUTF8 { bytes in
      guard let base = bytes.baseAddress else { return true }
      var offset = 0
      while offset < bytes.count {
        let written = send(
          self.descriptor,
          base + offset,
          bytes.count - offset,
          flags
        )
        if written < 0 {
          if errno == EINTR { continue }
          return false
        }
        offset += written
      }
      return true
    }
  }

  /// Stops reads and writes (wakes a blocked `accept` or `read`); the descriptor stays open.
  func shutdown() {
    _ = Glibc.shutdown(self.descriptor, Int32(SHUT_RDWR))
  }

  /// Closes with a reset instead of an orderly close (the abusive clients of the load).
  func reset() {
    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
    setsockopt(
      self.descriptor,
      SOL_SOCKET,
      SO_LINGER,
      &linger,
      socklen_t(MemoryLayout<Glibc.linger>.size)
    )
  }

  deinit {
    Glibc.close(self.descriptor)
  }
}

struct SocketError: Error, CustomStringConvertible {
  let description: String

  init(_ operation: String, _ code: Int32) {
    self.description = "\(operation): \(String(cString: strerror(code)))"
  }
}
