@PER-0 @requires-periodic-tasks
Feature: Periodic 01 - The 5-second timer and its schedule

  The broker receives a notification every 5 seconds from the SQL engine's
  timer, counts the notifications, and performs its maintenance tasks on
  every notification, on every 2nd, or on every 5th.

  Every scenario's broker starts at second 0, which is off the clock's whole
  seconds and its 5-second grid: the notifications are counted
  from broker start, not from the clock's grid.

  Background:
    Given the topology "periodic"

  Scenario: [1] Notifications come every 5 seconds from broker start and are counted
    When time passes to second 52
    Then the log at "sql1" shows exactly:
      | second | event              | number |
      | 5      | timer notification | 1      |
      | 10     | timer notification | 2      |
      | 15     | timer notification | 3      |
      | 20     | timer notification | 4      |
      | 25     | timer notification | 5      |
      | 30     | timer notification | 6      |
      | 35     | timer notification | 7      |
      | 40     | timer notification | 8      |
      | 45     | timer notification | 9      |
      | 50     | timer notification | 10     |
    # what a broker shows of the count: a BCN, if it fires one without BCN clients, on every 5th notification only
    And the log at "sql1" has no "broker configuration notification" event until second 24.999
    And the log at "sql1" has no "broker configuration notification" event from second 25.001 until second 49.999

  @PER-5D @PER-1B
  Scenario: [2] Each notification runs the tasks of every notification, every 2nd and every 5th
    Given time passes to second 3
    And 1 task handler of "sql1" fails
    And time passes to second 8
    And 1 task handler of "sql1" fails
    When time passes to second 50
    Then the log at "sql1" shows exactly from second 5 until second 10:
      | second | event              | number | tasks                                                                                      |
      | 5      | timer notification | 1      | queue monitors, task handlers, message dispatcher                                          |
      | 10     | timer notification | 2      | queue monitors, task handlers, message dispatcher, transport connections, transmitter      |
    And the log at "sql1" shows exactly from second 25 until second 25:
      | event              | number | tasks                                                                                                                                                        |
      | timer notification | 5      | queue monitors, task handlers, message dispatcher, idle connections, forwarder, broker start, broker configuration notification, acknowledged message clean-up |
    And the log at "sql1" shows exactly from second 50 until second 50:
      | event              | number | tasks                                                                                                                                                                                             |
      | timer notification | 10     | queue monitors, task handlers, message dispatcher, transport connections, transmitter, idle connections, forwarder, broker start, broker configuration notification, acknowledged message clean-up |
    # what a broker shows: a task of every notification (restarting task handlers) at 5 and 10, and one of
    # every 5th (a Broker Configuration Notification, where it fires one) at 25 and 50 only
    And the log at "sql1" shows exactly:
      | second | event                   |
      | 5      | task handlers restarted |
      | 10     | task handlers restarted |
    And the log at "sql1" has no "broker configuration notification" event until second 24.999
    And the log at "sql1" has no "broker configuration notification" event from second 25.001 until second 49.999
