public import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Splits a byte stream into lines, refusing lines longer than `maximum` bytes without buffering
/// them.
public struct LineFramer: Sendable {
  /// A framed line, or a line refused for its length.
  public enum Item: Equatable, Sendable {
    /// A line, without its newline (and without a trailing carriage return).
    case line(String)
    /// A line longer than ``LineFramer/maximum`` bytes: it was skipped up to its newline.
    case tooLong
  }

  /// The longest line, in bytes, that is kept.
  public let maximum: Int
  private var pending: [UInt8] = []
  private var discarding = false

  /// A framer keeping lines of at most `maximum` bytes.
  public init(maximum: Int) {
    self.maximum = maximum
  }

  /// Frames `bytes`, appending the lines (and refusals) they complete to `items`.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer, into items: inout [Item]) {
    for byte in bytes {
      if byte == UInt8(ascii: "\n") {
        if self.discarding {
          self.discarding = false
        } else {
          if self.pending.last == UInt8(ascii: "\r") { self.pending.removeLast() }
          items.append(.line(String(decoding: self.pending, as: UTF8.self)))
        }
        self.pending.removeAll(keepingCapacity: self.pending.count <= 4_096)
      } else if !self.discarding {
        if self.pending.count == self.maximum {
          self.discarding = true
          self.pending = []
          items.append(.tooLong)
        } else {
          self.pending.append(byte)
        }
      }
    }
  }
}

/// Runs `body` on a new thread (blocking socket work stays off the cooperative pool).
public func startThread(_ body: @escaping @Sendable () -> Void) {
  final class Box: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
  }
  var thread = pthread_t()
  var attributes = pthread_attr_t()
  pthread_attr_init(&attributes)
  pthread_attr_setstacksize(&attributes, 256 * 1024)
  let context = Unmanaged.passRetained(Box(body)).toOpaque()
  let created = pthread_create(
    &thread,
    &attributes,
    { context in
      guard let context else { return nil }
      let box = Unmanaged<Box>.fromOpaque(context).takeRetainedValue()
      box.body()
      return nil
    },
    context
  )
  pthread_attr_destroy(&attributes)
  precondition(created == 0, "pthread_create failed: \(created)")
  pthread_detach(thread)
}

/// A semaphore holding `count` credits: a reader thread takes one before it hands over an item,
/// and its consumer gives one back as it takes an item (back-pressure between the two).
///
/// NB: made at 0 and given its credits after, not made with `value: count`: libdispatch traps when
/// a semaphore goes while its value is below the one it was made with, and a consumer that stops
/// early (a `quit`, a shutdown) leaves credits taken.
public func creditSemaphore(_ count: Int) -> DispatchSemaphore {
  let semaphore = DispatchSemaphore(value: 0)
  for _ in 0..<count { semaphore.signal() }
  return semaphore
}
