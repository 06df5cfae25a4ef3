public import Unidirectional

/// The seeds' nth-prime computation: counts primes from 2 upward, sends progress every 1,000
/// numbers checked and the prime at the end, and stops as soon as its task is cancelled.
///
/// For n = 200 it sends progress 0.84 (168 primes are below 1,000) and then 1,223.
public func computeNthPrime<Action: Sendable>(
  _ n: Int,
  progress: @escaping @Sendable (_ fraction: Double, _ checked: Int) -> Action,
  response: @escaping @Sendable (Int) -> Action,
  send: Send<Action>
) async {
  var primeCount = 0
  var candidate = 2
  while primeCount < n {
    if Task.isCancelled { return }
    if isPrime(candidate) { primeCount += 1 }
    if candidate % 1_000 == 0 {
      await send(progress(Double(primeCount) / Double(n), candidate))
    }
    candidate += 1
  }
  await send(response(candidate - 1))
}

/// Whether `number` is prime, by trial division.
public func isPrime(_ number: Int) -> Bool {
  if number <= 1 { return false }
  if number <= 3 { return true }
  if number % 2 == 0 { return false }
  var divisor = 3
  while divisor * divisor <= number {
    if number % divisor == 0 { return false }
    divisor += 2
  }
  return true
}
